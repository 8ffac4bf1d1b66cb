// Capacity headroom of one model: the share of its instances' time the current arrival mix needs, and the
// saturation throughput for that mix. Pure arithmetic over what it is told, on an injected clock; no Prometheus
// here (ModelMetrics exports the estimate as sluice_capacity_utilization and sluice_capacity_max_requests_per_second).
//
// Arrivals: every request offered to the scheduler (validated; refusals for a full queue count too, they are
// demand) adds its rows to the bucket its length pads to, kept for the last `window` (60 s) in kSlots time slots.
// Cost: per (bucket b, compiled batch size B), the batch compute time c(b, B) = an EWMA (new batch weighted
// kSmoothing) of the compute time of the batches that ran at that shape. A shape that has not run yet uses its
// warm-up time (Backend::load_stats() steady_seconds) × k, k = Σ measured / Σ warm-up over the shapes that have
// both (1 before any batch ran): warm-up times calibrated by what the load measures.
// Under full load the scheduler forms, per bucket, batches of its most efficient size (DynamicBatcher's rule: the
// largest size within 5 % of the best rows/s), B*_b, so one row of bucket b costs t_b = c(b, B*_b) / B*_b of an
// instance's time. Over the window (span T, N requests, n_b rows in bucket b), with I instances:
//   needed  = Σ_b (n_b / T) · t_b                       instance-seconds per second the mix needs
//   utilization = needed / I                            (= arrivals/s ÷ max_requests_per_second)
//   max_requests_per_second = I · N / Σ_b n_b · t_b     (= I / Σ_b share_b · t_b with one row per request)
// utilization exceeds 1 when more arrives than the instances can serve (then the queue grows or refuses).
// Below saturation the scheduler forms smaller batches than B*, so the instances are busier than `utilization`
// says (sluice_instance_busy_ratio): the estimate is what the mix costs when batched as it is under full load.
// With no arrival in the window: utilization 0 and max_requests_per_second for the mix of every arrival since
// start (none ever: every request in the largest bucket). A bucket with no cost known at any batch size counts 0.
// Instances are assumed alike (one cost table for all of them). T is the time the counted slots span: from the
// start of the oldest (between window − window/kSlots and window ago) or from construction, whichever is later.
//
// Thread-safety: RecordArrival (request paths), RecordBatch (instance threads) and Estimate (Render) are safe
// from any thread; one mutex guards the state and nothing is called under it but the clock.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "backend/backend.h"
#include "scheduler/bucket_table.h"
#include "scheduler/clock.h"
#include "backend/base/sync.h"

namespace sluice {

struct CapacityEstimatorOptions {
  BucketSpec buckets;  // the model's compiled shapes
  int instances = 1;
  // Warm-up batch compute seconds [bucket][batch size index]; 0 (or missing) = unknown.
  std::vector<std::vector<double>> warmup_seconds;
  const Clock* clock = &Clock::Real();  // must outlive the estimator
  absl::Duration window = absl::Seconds(60);
};

struct CapacityEstimate {
  double arrivals_per_second = 0;       // requests in the window ÷ T
  double needed_instance_seconds = 0;   // per second: Σ_b rate_b · t_b
  double utilization = 0;               // needed ÷ instances
  double max_requests_per_second = 0;   // 0 while no cost is known
};

class CapacityEstimator {
 public:
  static constexpr int kSlots = 60;
  static constexpr double kSmoothing = 0.2;

  explicit CapacityEstimator(CapacityEstimatorOptions options);
  CapacityEstimator(const CapacityEstimator&) = delete;
  CapacityEstimator& operator=(const CapacityEstimator&) = delete;

  // The warm-up table for CapacityEstimatorOptions: per shape, the mean steady_seconds of the instances that
  // report one; for a sim model whose instances report none, its configured cost (base + per sample × B × L).
  static std::vector<std::vector<double>> WarmupSeconds(const ModelConfig& model,
                                                        const std::vector<const Backend*>& instances);

  // A request of `rows` rows of real length `length` was offered to the scheduler. Lengths outside the buckets
  // are ignored.
  void RecordArrival(int64_t rows, int64_t length);
  // A batch ran at (bucket_length, batch_size) and its graph took `compute`. Unknown shapes are ignored.
  void RecordBatch(int64_t bucket_length, int batch_size, absl::Duration compute);

  CapacityEstimate Estimate() const;

 private:
  struct Slot {
    int64_t index = -1;             // which slot of time since start_ it holds; -1 = empty
    int64_t requests = 0;
    std::vector<int64_t> rows;      // per bucket
  };

  int64_t SlotIndex(absl::Time t) const;
  // t_b of every bucket (seconds of one instance per row), 0 where unknown.
  std::vector<double> SecondsPerRowLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // I · requests / Σ_b rows_b · t_b; 0 when the sum is 0.
  double MaxRequestsPerSecond(double requests, const std::vector<double>& rows,
                              const std::vector<double>& seconds_per_row) const;

  const BucketTable table_;
  const int instances_;
  const std::vector<std::vector<double>> warmup_;  // [bucket][batch size index]
  const Clock& clock_;
  const absl::Duration window_;
  const absl::Duration slot_width_;
  const absl::Time start_;

  mutable Mutex mu_;
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);                   // kSlots ring, by index % kSlots
  std::vector<std::vector<double>> measured_ ABSL_GUARDED_BY(mu_);  // EWMA seconds; 0 = none yet
  std::vector<int64_t> rows_ever_ ABSL_GUARDED_BY(mu_);            // per bucket, since start
  int64_t requests_ever_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice
