// The Scheduler seam: one per model. Accepts requests of any length, batches them into compiled
// (batch size, length) buckets, runs them on the model's instances and answers each through on_done.
// Thread-safety: every method is safe to call from any thread concurrently.
#pragma once

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/model_config.h"
#include "scheduler/infer_request.h"

namespace sluice {

// What one executed batch did: for metrics (batch counts, padding waste, compute time, instance busy time).
struct BatchReport {
  int instance = 0;          // index into the model's instances
  int64_t bucket_length = 0;
  int batch_size = 0;        // compiled batch size it ran at
  int rows = 0;              // real requests in it (the rest were dummy rows)
  int64_t real_steps = 0;    // sum of the real rows' lengths (samples or tokens)
  absl::Duration compute;
  bool ok = true;            // false when the backend failed the batch
  bool timed_out = false;    // it ran past execution_timeout_ms: answered Unavailable, instance out of rotation
};

// Called on the thread that answers the batch (its instance's finishing or executor thread), before its requests'
// on_done (for a batch that timed out: on the batcher thread, once, when it is answered); no scheduler lock is held.
// Must be cheap and thread-safe (instances report concurrently).
using BatchObserver = std::function<void(const BatchReport&)>;

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

  // Removes a still-queued request and answers it CANCELLED: its on_done runs on this (the caller's) thread
  // before Cancel returns, so the caller must not hold a lock that on_done takes. No effect once its batch has
  // started (it is then answered normally) or when the id is unknown.
  virtual void Cancel(RequestId id) = 0;

  // Refuses new requests, finishes every accepted one, then returns. Idempotent.
  virtual void Stop() = 0;

  // Accepted requests not yet answered (queued + running).
  virtual int64_t InFlight() const = 0;
  // Accepted requests still waiting in a queue (not yet in a running batch).
  virtual int64_t QueueDepth() const = 0;
  // Instances still given batches. An instance whose backend answers a batch Unavailable (its device is gone),
  // or whose batch runs longer than the model's execution_timeout_ms (hung; that batch is answered Unavailable
  // at the timeout), is taken out of rotation for good; with none left, queued and new requests are answered
  // Unavailable.
  virtual int InstancesInRotation() const = 0;

  virtual const ModelConfig& model() const = 0;
};

}  // namespace sluice
