#include "server/metrics/model_stats.h"

#include <cmath>

#include "absl/time/clock.h"

namespace sluice {

void ModelStats::RecordRow(const InferResponse& response, absl::Duration total) {
  sluice::MutexLock lock(&mu_);
  stats_.last_inference_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
  if (!response.status.ok()) {
    stats_.fail.Add(total);
    return;
  }
  ++stats_.inference_count;
  stats_.success.Add(total);
  stats_.queue.Add(response.queue_time);
  stats_.compute_infer.Add(response.compute_time);
  stats_.compute_input.Add(response.input_time);
  stats_.compute_output.Add(response.output_time);
  if (response.batch_size > 0) {
    const double share = 1.0 / std::max(1, response.batch_rows_used);
    BatchSizeStat& batch = stats_.batch[response.batch_size];
    batch.executions += share;
    batch.compute_input.Add(response.input_time);
    batch.compute_infer.Add(response.compute_time);
    batch.compute_output.Add(response.output_time);
    executions_ += share;
  }
}

DurationStat PerExecution(const DurationStat& per_row, double executions) {
  DurationStat out;
  out.count = static_cast<uint64_t>(executions + 0.5);
  if (per_row.count > 0) {
    out.ns = static_cast<uint64_t>(static_cast<double>(per_row.ns) / static_cast<double>(per_row.count) * executions);
  }
  return out;
}

void ModelStats::RecordRejected(absl::Duration total) {
  sluice::MutexLock lock(&mu_);
  stats_.last_inference_ms = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now()));
  stats_.fail.Add(total);
}

ModelStatsSnapshot ModelStats::Snapshot() const {
  sluice::MutexLock lock(&mu_);
  ModelStatsSnapshot snapshot = stats_;
  snapshot.execution_count = static_cast<uint64_t>(std::llround(executions_));
  return snapshot;
}

}  // namespace sluice
