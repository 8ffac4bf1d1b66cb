// The runner's seam to a server: calls sent asynchronously, each ending in one callback with its Outcome
// (call.h). One implementation per API family (kserve/: gRPC and REST; speech/: Riva Recognize; generation/:
// OpenAI streamed completions, Triton ModelStreamInfer), each owning its wire format.
// Thread-safety: implementations are thread-safe. Callbacks run on the client's threads (or, for a call refused
// before sending, on the caller's) and must be short; they may call Send().
// REQUIRES: the client outlives every call it sent (implementations' destructors cancel and wait for them).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "absl/time/time.h"
#include "loadtest/core/call.h"

namespace sluice::loadtest {

class LoadClient {
 public:
  using OutcomeDone = std::function<void(const Outcome&)>;

  virtual ~LoadClient() = default;

  // Sends one call; `done` runs once when it ends (OK, error, deadline or cancellation).
  virtual void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) = 0;
  // Cancels every call in flight; their callbacks still run (CANCELLED).
  virtual void CancelAll() = 0;
  // Blocks until no call is in flight or `timeout` passes; true when none is.
  virtual bool WaitIdle(absl::Duration timeout) = 0;
  virtual int64_t in_flight() const = 0;

  // One blocking call (Send and wait).
  Outcome SendAndWait(Call call, std::chrono::system_clock::time_point deadline);

 protected:
  LoadClient() = default;
};

}  // namespace sluice::loadtest
