#include "scheduler/delivery_lane.h"

#include <utility>

namespace sluice {

DeliveryLane::DeliveryLane() : thread_([this] { Run(); }) {}

DeliveryLane::~DeliveryLane() {
  {
    MutexLock lock(&mu_);
    closing_ = true;
    posted_.SignalAll();
  }
  thread_.join();
}

void DeliveryLane::Post(std::function<void()> work, int max_queued) {
  MutexLock lock(&mu_);
  while (max_queued >= 0 && static_cast<int>(queue_.size()) > max_queued) taken_.Wait(&mu_);
  queue_.push_back(std::move(work));
  posted_.Signal();
}

void DeliveryLane::Run() {
  while (true) {
    std::function<void()> work;
    {
      MutexLock lock(&mu_);
      while (queue_.empty() && !closing_) posted_.Wait(&mu_);
      if (queue_.empty()) return;  // closing, and everything posted has run
      work = std::move(queue_.front());
      queue_.pop_front();
      taken_.SignalAll();
    }
    work();
  }
}

}  // namespace sluice
