#include "scheduler/bucket_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice {

absl::StatusOr<size_t> BucketTable::BucketFor(int64_t length) const {
  if (length <= 0) return absl::InvalidArgumentError(absl::StrCat("input length ", length, " must be at least 1"));
  auto it = std::lower_bound(lengths_.begin(), lengths_.end(), length);
  if (it == lengths_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("input length ", length, " exceeds the largest compiled bucket (",
                                                   lengths_.back(), ")"));
  }
  return static_cast<size_t>(it - lengths_.begin());
}

size_t BucketTable::BatchSizeIndex(int batch_size) const {
  const size_t index = std::lower_bound(batch_sizes_.begin(), batch_sizes_.end(), batch_size) - batch_sizes_.begin();
  return std::min(index, batch_sizes_.size() - 1);
}

int BucketTable::BatchSizeFor(int n) const { return batch_sizes_[BatchSizeIndex(n)]; }

int BucketTable::LargestBatchSizeAtMost(int n) const {
  auto it = std::upper_bound(batch_sizes_.begin(), batch_sizes_.end(), n);
  return it == batch_sizes_.begin() ? 0 : *(it - 1);
}

}  // namespace sluice
