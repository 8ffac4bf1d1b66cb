#include "scheduler/bucket_queue.h"

#include <algorithm>

namespace sluice {

void BucketQueue::Push(std::unique_ptr<QueuedRequest> request) {
  levels_[request->level - 1].push_back(std::move(request));
  ++size_;
}

const QueuedRequest& BucketQueue::Head() const {
  for (const auto& level : levels_) {
    if (!level.empty()) return *level.front();
  }
  return *levels_.front().front();  // unreachable when the precondition holds
}

absl::Time BucketQueue::ReadyTime(size_t skip, absl::Duration max_delay, absl::Duration compute_estimate) const {
  absl::Time ready = absl::InfiniteFuture();
  size_t position = 0;
  for (const auto& level : levels_) {
    for (const auto& queued : level) {
      if (position++ < skip) continue;
      ready = std::min(ready, queued->enqueued + max_delay);
      if (queued->request.deadline != absl::InfiniteFuture()) {
        ready = std::min(ready, queued->request.deadline - compute_estimate);
      }
    }
  }
  return ready;
}

absl::Time BucketQueue::EarliestDeadline() const {
  absl::Time earliest = absl::InfiniteFuture();
  for (const auto& level : levels_) {
    for (const auto& queued : level) earliest = std::min(earliest, queued->request.deadline);
  }
  return earliest;
}

std::vector<std::unique_ptr<QueuedRequest>> BucketQueue::TakeFront(size_t n) {
  std::vector<std::unique_ptr<QueuedRequest>> taken;
  for (auto& level : levels_) {
    while (taken.size() < n && !level.empty()) {
      taken.push_back(std::move(level.front()));
      level.pop_front();
    }
  }
  size_ -= taken.size();
  return taken;
}

std::vector<std::unique_ptr<QueuedRequest>> BucketQueue::TakeExpired(absl::Time now) {
  std::vector<std::unique_ptr<QueuedRequest>> expired;
  for (auto& level : levels_) {
    auto keep = std::stable_partition(level.begin(), level.end(),
                                      [&](const auto& queued) { return queued->request.deadline > now; });
    for (auto it = keep; it != level.end(); ++it) expired.push_back(std::move(*it));
    level.erase(keep, level.end());
  }
  size_ -= expired.size();
  return expired;
}

std::unique_ptr<QueuedRequest> BucketQueue::Remove(RequestId id) {
  for (auto& level : levels_) {
    auto it = std::find_if(level.begin(), level.end(), [&](const auto& queued) { return queued->id == id; });
    if (it != level.end()) {
      std::unique_ptr<QueuedRequest> removed = std::move(*it);
      level.erase(it);
      --size_;
      return removed;
    }
  }
  return nullptr;
}

}  // namespace sluice
