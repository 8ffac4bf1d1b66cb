// The calls a client has in flight, shared by every client that hands its calls to gRPC's callback API (KServe
// gRPC, Riva Recognize, Triton ModelStreamInfer): each call is owned here from Send until it finishes, so that
// CancelAll can reach every call in flight without holding the lock while it calls into gRPC, and WaitIdle can
// wait for the last one.
// Thread-safety: thread-safe. Never calls out while holding its lock; the shared_ptrs Snapshot returns keep each
// call alive past its Remove, so a cancel racing a finish touches live memory.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backend/base/sync.h"

namespace sluice::loadtest {

template <typename Call>
class CallRegistry {
 public:
  // Takes `call` in; returns it for the caller's use (it stays alive until Remove, at least).
  Call* Add(std::shared_ptr<Call> call) {
    Call* raw = call.get();
    MutexLock lock(&mu_);
    calls_.emplace(raw, std::move(call));
    return raw;
  }

  // Forgets `call`, returning its last owner here: the caller frees it, after the lock (unless a Snapshot still
  // holds it). REQUIRES: `call` was added and not yet removed.
  std::shared_ptr<Call> Remove(Call* call) {
    MutexLock lock(&mu_);
    auto it = calls_.find(call);
    std::shared_ptr<Call> owned = std::move(it->second);
    calls_.erase(it);
    if (calls_.empty()) idle_.SignalAll();
    return owned;
  }

  // Every call in flight now, each kept alive by the vector.
  std::vector<std::shared_ptr<Call>> Snapshot() const {
    std::vector<std::shared_ptr<Call>> out;
    MutexLock lock(&mu_);
    out.reserve(calls_.size());
    for (const auto& [raw, call] : calls_) out.push_back(call);
    return out;
  }

  // Blocks until no call is in flight or `timeout` passes; true when none is.
  bool WaitIdle(absl::Duration timeout) const {
    const absl::Time deadline = absl::Now() + timeout;
    MutexLock lock(&mu_);
    while (!calls_.empty()) {
      if (absl::Now() >= deadline) return false;
      idle_.WaitUntil(&mu_, deadline);
    }
    return true;
  }

  int64_t size() const {
    MutexLock lock(&mu_);
    return static_cast<int64_t>(calls_.size());
  }

 private:
  mutable Mutex mu_;
  mutable CondVar idle_;  // signalled when the last call is removed
  absl::flat_hash_map<Call*, std::shared_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::loadtest
