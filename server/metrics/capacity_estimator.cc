#include "server/metrics/capacity_estimator.h"

#include <algorithm>
#include <utility>

#include "backend/sim_backend.h"

namespace sluice {

CapacityEstimator::CapacityEstimator(CapacityEstimatorOptions options)
    : table_(options.buckets),
      instances_(std::max(1, options.instances)),
      warmup_(std::move(options.warmup_seconds)),
      clock_(*options.clock),
      window_(options.window),
      slot_width_(options.window / kSlots),
      start_(options.clock->Now()),
      slots_(kSlots),
      measured_(table_.num_buckets(), std::vector<double>(table_.batch_sizes().size(), 0.0)),
      rows_ever_(table_.num_buckets(), 0) {
  for (Slot& slot : slots_) slot.rows.assign(table_.num_buckets(), 0);
}

std::vector<std::vector<double>> CapacityEstimator::WarmupSeconds(const ModelConfig& model,
                                                                  const std::vector<const Backend*>& instances) {
  const auto& lengths = model.buckets.lengths;
  const auto& sizes = model.buckets.batch_sizes;
  std::vector<std::vector<double>> seconds(lengths.size(), std::vector<double>(sizes.size(), 0.0));
  for (size_t b = 0; b < lengths.size(); ++b) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      double sum = 0;
      int count = 0;
      for (const Backend* instance : instances) {
        for (const BucketLoadStats& s : instance->load_stats()) {
          if (s.length == lengths[b] && s.batch_size == sizes[k] && s.steady_seconds > 0) {
            sum += s.steady_seconds;
            ++count;
          }
        }
      }
      if (count > 0) {
        seconds[b][k] = sum / count;
      } else if (model.sim) {
        seconds[b][k] = absl::ToDoubleSeconds(SimLatency(*model.sim, sizes[k], lengths[b]));
      }
    }
  }
  return seconds;
}

int64_t CapacityEstimator::SlotIndex(absl::Time t) const {
  if (t <= start_) return 0;
  absl::Duration remainder;
  return absl::IDivDuration(t - start_, slot_width_, &remainder);
}

void CapacityEstimator::RecordArrival(int64_t rows, int64_t length) {
  absl::StatusOr<size_t> bucket = table_.BucketFor(length);
  if (!bucket.ok() || rows <= 0) return;
  const int64_t index = SlotIndex(clock_.Now());
  MutexLock lock(&mu_);
  Slot& slot = slots_[index % kSlots];
  if (slot.index != index) {
    slot.index = index;
    slot.requests = 0;
    std::fill(slot.rows.begin(), slot.rows.end(), 0);
  }
  ++slot.requests;
  slot.rows[*bucket] += rows;
  ++requests_ever_;
  rows_ever_[*bucket] += rows;
}

void CapacityEstimator::RecordBatch(int64_t bucket_length, int batch_size, absl::Duration compute) {
  absl::StatusOr<size_t> bucket = table_.BucketFor(bucket_length);
  if (!bucket.ok() || table_.length(*bucket) != bucket_length) return;
  const size_t k = table_.BatchSizeIndex(batch_size);
  if (table_.batch_sizes()[k] != batch_size) return;
  const double seconds = absl::ToDoubleSeconds(compute);
  MutexLock lock(&mu_);
  double& estimate = measured_[*bucket][k];
  estimate = estimate == 0 ? seconds : (1 - kSmoothing) * estimate + kSmoothing * seconds;
}

std::vector<double> CapacityEstimator::SecondsPerRowLocked() const {
  const auto& sizes = table_.batch_sizes();
  auto warm = [&](size_t b, size_t k) { return b < warmup_.size() && k < warmup_[b].size() ? warmup_[b][k] : 0.0; };
  // k: how much slower (or faster) the shapes that ran are under this load than at warm-up.
  double measured_sum = 0, warm_sum = 0;
  for (size_t b = 0; b < table_.num_buckets(); ++b) {
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (measured_[b][k] > 0 && warm(b, k) > 0) {
        measured_sum += measured_[b][k];
        warm_sum += warm(b, k);
      }
    }
  }
  const double calibration = warm_sum > 0 ? measured_sum / warm_sum : 1.0;
  std::vector<double> seconds_per_row(table_.num_buckets(), 0.0);
  for (size_t b = 0; b < table_.num_buckets(); ++b) {
    std::vector<double> rows_per_second(sizes.size(), 0.0);
    double best = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const double cost = measured_[b][k] > 0 ? measured_[b][k] : warm(b, k) * calibration;
      if (cost > 0) rows_per_second[k] = sizes[k] / cost;
      best = std::max(best, rows_per_second[k]);
    }
    if (best == 0) continue;  // nothing known about this bucket
    for (size_t k = sizes.size(); k-- > 0;) {
      if (rows_per_second[k] >= 0.95 * best) {
        seconds_per_row[b] = 1.0 / rows_per_second[k];
        break;
      }
    }
  }
  return seconds_per_row;
}

double CapacityEstimator::MaxRequestsPerSecond(double requests, const std::vector<double>& rows,
                                               const std::vector<double>& seconds_per_row) const {
  double instance_seconds = 0;
  for (size_t b = 0; b < rows.size(); ++b) instance_seconds += rows[b] * seconds_per_row[b];
  return instance_seconds > 0 ? instances_ * requests / instance_seconds : 0.0;
}

CapacityEstimate CapacityEstimator::Estimate() const {
  const absl::Time now = clock_.Now();
  const int64_t current = SlotIndex(now);
  // The counted slots run from the start of slot current - kSlots + 1 (or start_) to now.
  const absl::Time from = start_ + slot_width_ * std::max<int64_t>(0, current - kSlots + 1);
  const double span = absl::ToDoubleSeconds(now - from);

  std::vector<double> rows(table_.num_buckets(), 0.0);
  double requests = 0;
  std::vector<double> seconds_per_row;
  std::vector<double> rows_ever(table_.num_buckets(), 0.0);
  double requests_ever = 0;
  {
    MutexLock lock(&mu_);
    for (const Slot& slot : slots_) {
      if (slot.index < 0 || slot.index > current || slot.index <= current - kSlots) continue;
      requests += static_cast<double>(slot.requests);
      for (size_t b = 0; b < rows.size(); ++b) rows[b] += static_cast<double>(slot.rows[b]);
    }
    seconds_per_row = SecondsPerRowLocked();
    requests_ever = static_cast<double>(requests_ever_);
    for (size_t b = 0; b < rows_ever.size(); ++b) rows_ever[b] = static_cast<double>(rows_ever_[b]);
  }

  CapacityEstimate estimate;
  if (requests > 0) {
    double needed = 0;
    for (size_t b = 0; b < rows.size(); ++b) needed += rows[b] * seconds_per_row[b];
    if (span > 0) {
      estimate.arrivals_per_second = requests / span;
      estimate.needed_instance_seconds = needed / span;
      estimate.utilization = estimate.needed_instance_seconds / instances_;
    }
    estimate.max_requests_per_second = MaxRequestsPerSecond(requests, rows, seconds_per_row);
  } else if (requests_ever > 0) {  // idle window: the mix seen since start
    estimate.max_requests_per_second = MaxRequestsPerSecond(requests_ever, rows_ever, seconds_per_row);
  } else {  // nothing ever arrived: every request in the largest bucket
    std::vector<double> largest(table_.num_buckets(), 0.0);
    largest.back() = 1;
    estimate.max_requests_per_second = MaxRequestsPerSecond(1, largest, seconds_per_row);
  }
  return estimate;
}

}  // namespace sluice
