// Per-model inference statistics in the shape of Triton's ModelStatistics: success/fail counts and durations,
// queue and compute time, and per-batch-size execution counts. Filled from each row's InferResponse.
// Thread-safety: every method may be called from any thread (one mutex; no callbacks under it).
#pragma once

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "backend/base/sync.h"
#include "absl/time/time.h"
#include "scheduler/infer_request.h"

namespace sluice {

struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void Add(absl::Duration d) {
    ++count;
    ns += static_cast<uint64_t>(absl::ToInt64Nanoseconds(d));
  }
};

// Per compiled batch size; the durations are per-row sums (every row of one execution saw the same times).
struct BatchSizeStat {
  double executions = 0;  // each row adds 1/rows_in_its_batch, so a full batch of B rows counts once
  DurationStat compute_input, compute_infer, compute_output;
};

// Triton reports batch statistics per execution: `per_row` (a per-row sum) scaled to `executions` executions.
DurationStat PerExecution(const DurationStat& per_row, double executions);

struct ModelStatsSnapshot {
  uint64_t last_inference_ms = 0;  // since the epoch
  uint64_t inference_count = 0;    // successful rows
  uint64_t execution_count = 0;    // graph executions these rows ran in (rounded)
  DurationStat success, fail, queue, compute_infer;
  // compute_input: gathering the batch into its padded tensor; compute_infer: the graph; compute_output:
  // scattering and trimming the outputs. One entry per row for all three (Triton's tools, e.g. perf_analyzer,
  // require the three counts to be equal).
  DurationStat compute_input, compute_output;
  std::map<int, BatchSizeStat> batch;  // by compiled batch size
};

class ModelStats {
 public:
  // One row's answer; `total` = request arrival to answer.
  void RecordRow(const InferResponse& response, absl::Duration total);
  // A request refused before any row ran (validation or enqueue error).
  void RecordRejected(absl::Duration total);
  ModelStatsSnapshot Snapshot() const;

 private:
  mutable sluice::Mutex mu_;
  ModelStatsSnapshot stats_ ABSL_GUARDED_BY(mu_);
  double executions_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice
