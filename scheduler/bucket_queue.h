// The waiting requests of one length bucket: priority levels (1 = highest), FIFO within a level.
// Thread-safety: none; the DynamicBatcher guards all of its queues with its one mutex (mu_).
#pragma once

#include <deque>
#include <memory>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/infer_request.h"

namespace sluice {

struct QueuedRequest {
  RequestId id = 0;
  InferRequest request;
  absl::Time enqueued;
  int level = 1;  // 1 = highest priority
};

class BucketQueue {
 public:
  explicit BucketQueue(int priority_levels) : levels_(priority_levels) {}

  void Push(std::unique_ptr<QueuedRequest> request);
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  // The request that would run first: the oldest of the highest non-empty level. REQUIRES: !empty().
  const QueuedRequest& Head() const;

  // When a batch of this queue must close, ignoring the first `skip` requests in run order: the earliest of
  // (enqueued + max_delay) and (deadline - compute_estimate) over the rest. InfiniteFuture when none remain.
  absl::Time ReadyTime(size_t skip, absl::Duration max_delay, absl::Duration compute_estimate) const;
  absl::Time EarliestDeadline() const;

  // Removes and returns up to n requests in run order.
  std::vector<std::unique_ptr<QueuedRequest>> TakeFront(size_t n);
  // Removes and returns every request whose deadline is <= now.
  std::vector<std::unique_ptr<QueuedRequest>> TakeExpired(absl::Time now);
  // Removes the request with this id; nullptr when it is not here.
  std::unique_ptr<QueuedRequest> Remove(RequestId id);

 private:
  std::vector<std::deque<std::unique_ptr<QueuedRequest>>> levels_;  // index = level - 1
  size_t size_ = 0;
};

}  // namespace sluice
