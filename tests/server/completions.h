// Test helper: every completion of one asynchronous call (ServedModel::Infer, EmbeddingModel::Embed, ...), with the
// thread each ran on, for tests that check "called exactly once, on which thread". Shared (std::shared_ptr) with the
// completion, which may run after the test body's locals are gone (a scheduler thread, during Stop).
// Thread-safety: the completion may run on any thread; every method may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "backend/base/sync.h"

namespace sluice::testing {

template <typename Result>
class Completions {
 public:
  static std::shared_ptr<Completions> Make() { return std::make_shared<Completions>(); }
  static std::function<void(Result)> For(const std::shared_ptr<Completions>& completions) {
    return [completions](Result result) {
      MutexLock lock(&completions->mu_);
      completions->results_.push_back(std::move(result));
      completions->threads_.push_back(std::this_thread::get_id());
      completions->cv_.SignalAll();
    };
  }
  // Waits (real time, bounded) for the first completion; false if none came.
  bool WaitForOne(absl::Duration timeout = absl::Seconds(5)) {
    const absl::Time give_up = absl::Now() + timeout;
    MutexLock lock(&mu_);
    while (results_.empty() && absl::Now() < give_up) cv_.WaitUntil(&mu_, give_up);
    return !results_.empty();
  }
  size_t count() {
    MutexLock lock(&mu_);
    return results_.size();
  }
  Result first() {
    MutexLock lock(&mu_);
    return results_.at(0);
  }
  std::thread::id thread() {
    MutexLock lock(&mu_);
    return threads_.at(0);
  }

 private:
  Mutex mu_;
  CondVar cv_;
  std::vector<Result> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread::id> threads_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::testing
