// The Scheduler seam: one per model. Accepts requests of any length, batches them into compiled
// (batch size, length) buckets, runs them on the model's instances and answers each through on_done.
// Thread-safety: every method is safe to call from any thread concurrently.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "backend/model_config.h"
#include "scheduler/infer_request.h"

namespace sluice {

class Scheduler {
 public:
  Scheduler() = default;
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  virtual ~Scheduler() = default;

  // OK: accepted, and request.on_done will be called exactly once. An error: rejected now and on_done is
  // never called: InvalidArgument (length 0, longer than the largest bucket, inputs not matching the model),
  // ResourceExhausted (queue full), Unavailable (stopping), DeadlineExceeded (deadline already passed).
  virtual absl::StatusOr<RequestId> Enqueue(InferRequest request) = 0;

  // Removes a still-queued request and answers it CANCELLED. No effect once its batch has started
  // (it is then answered normally) or when the id is unknown.
  virtual void Cancel(RequestId id) = 0;

  // Refuses new requests, finishes every accepted one, then returns. Idempotent.
  virtual void Stop() = 0;

  // Accepted requests not yet answered (queued + running).
  virtual int64_t InFlight() const = 0;
  // Accepted requests still waiting in a queue (not yet in a running batch).
  virtual int64_t QueueDepth() const = 0;

  virtual const ModelConfig& model() const = 0;
};

}  // namespace sluice
