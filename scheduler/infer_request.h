// What the front ends hand the scheduler, and what comes back. Native types only: no JSON or protobuf.
// Thread-safety: plain values. `on_done` is called exactly once per accepted request (Enqueue returned OK),
// never under a scheduler lock, on the DynamicBatcher's threads: when the request ran, the ran instance's finishing
// thread, or its executor thread when that instance had nothing else to run; the batcher thread when it expired in its queue, when its
// batch ran past execution_timeout_ms, or when no instance is left in rotation; the thread that called
// Scheduler::Cancel when it was cancelled before running.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend/base/tensor.h"

namespace sluice {

using RequestId = uint64_t;

struct InferResponse {
  absl::Status status;               // OK, or why the request failed (DEADLINE_EXCEEDED, CANCELLED, backend error)
  std::vector<HostTensor> outputs;   // one per declared output, unbatched; variable axis trimmed to its real length
  absl::Duration queue_time;         // accepted -> its batch started
  absl::Duration input_time;         // gathering the batch's inputs into the padded tensor
  absl::Duration compute_time;       // its batch's graph execution
  absl::Duration output_time;        // scattering and trimming the batch's outputs
  int batch_size = 0;                // compiled batch size it ran in (0 when it never ran)
  int batch_rows_used = 0;           // real requests in that batch (the rest were dummy rows)
  int64_t bucket_length = 0;         // compiled length it was padded to
};

// Called exactly once per accepted request, never while a scheduler lock is held. Must not block for long: it
// runs on an instance's finishing or executor thread, the batcher thread, or a Cancel() caller's thread (see the header
// comment); front ends only serialize and hand the reply to their transport.
using DoneCallback = std::function<void(InferResponse)>;

struct InferRequest {
  std::vector<HostTensor> inputs;  // one per declared input, unbatched: [length, ...per-step dims]
  int64_t length = 0;              // real length along the variable axis (same for every input)
  absl::Time deadline = absl::InfiniteFuture();
  int priority = 0;                // 1 = highest; 0 = the model's default level
  DoneCallback on_done;
};

}  // namespace sluice
