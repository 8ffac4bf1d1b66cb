// A model's compiled shapes: which length bucket a request of a given real length goes to, and which compiled
// batch size a group of n requests runs at.
// Thread-safety: immutable after construction.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"

namespace sluice {

class BucketTable {
 public:
  explicit BucketTable(const BucketSpec& spec) : lengths_(spec.lengths), batch_sizes_(spec.batch_sizes) {}

  // Index of the smallest bucket whose length holds `length`. InvalidArgument naming the limit when the
  // length is not positive or exceeds the largest bucket.
  absl::StatusOr<size_t> BucketFor(int64_t length) const;

  // The smallest compiled batch size >= n (the largest one when n exceeds it). REQUIRES: n >= 1.
  int BatchSizeFor(int n) const;
  // Index (into batch_sizes()) of the smallest compiled batch size >= batch_size; the last index when none is.
  size_t BatchSizeIndex(int batch_size) const;
  // The largest compiled batch size <= n, or 0 when none is. REQUIRES: n >= 0.
  int LargestBatchSizeAtMost(int n) const;

  size_t num_buckets() const { return lengths_.size(); }
  int64_t length(size_t bucket) const { return lengths_[bucket]; }
  int max_batch_size() const { return batch_sizes_.back(); }
  const std::vector<int>& batch_sizes() const { return batch_sizes_; }

 private:
  std::vector<int64_t> lengths_;  // ascending
  std::vector<int> batch_sizes_;  // ascending
};

}  // namespace sluice
