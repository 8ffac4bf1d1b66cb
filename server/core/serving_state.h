// The server's readiness (loading, ready, draining) and the long calls admitted before a drain, shared by every
// model kind (ServedModel, GenerationModel) and every front end. Its own header so that the generation models
// (server/llm/) and the request path (server/core/) depend on it without depending on each other.
// Thread-safety: every method may be called from any thread; ready()/draining() are lock-free reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "backend/base/sync.h"

namespace sluice {

class ServingState;

// One long call admitted before a drain (a Riva Recognize with several windows, a Riva stream): while one is
// held the drain waits (within its grace), and the call's later requests, marked InferCall::continues_admitted,
// pass the draining refusal. Move-only; empty when the call was refused (the server is draining).
class AdmittedCall {
 public:
  AdmittedCall() = default;
  AdmittedCall(AdmittedCall&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  AdmittedCall& operator=(AdmittedCall&& other) noexcept;
  AdmittedCall(const AdmittedCall&) = delete;
  AdmittedCall& operator=(const AdmittedCall&) = delete;
  ~AdmittedCall();
  explicit operator bool() const { return state_ != nullptr; }

 private:
  friend class ServingState;
  explicit AdmittedCall(ServingState* state) : state_(state) {}
  ServingState* state_ = nullptr;
};

// The server's readiness, shared by its models and front ends. Loading: not ready; draining: refuses new work,
// while the long calls admitted before (AdmittedCall) run to their end.
class ServingState {
 public:
  bool ready() const { return ready_.load() && !draining_.load(); }
  bool draining() const { return draining_.load(); }
  void SetReady() { ready_ = true; }
  void BeginDrain() ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    draining_ = true;
  }
  // An empty AdmittedCall once the drain has begun: the check and the count are one step, so a drain never
  // misses a call admitted just before it.
  AdmittedCall Admit() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns once no admitted call is left. REQUIRES: BeginDrain was called (else new calls may keep coming).
  void WaitForAdmittedCalls() ABSL_LOCKS_EXCLUDED(mu_);
  int64_t admitted_calls() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  friend class AdmittedCall;
  void Leave() ABSL_LOCKS_EXCLUDED(mu_);

  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};  // set under mu_ (Admit reads it there); read lock-free elsewhere
  mutable Mutex mu_;
  CondVar left_;
  int64_t admitted_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice
