// PrepQueue: the oneTBB arena where generation calls are tokenized, off the caller's (I/O) thread, with a bound
// on how many of one queue's jobs wait or run at once.
#include "server/llm/prep_queue.h"

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "backend/base/sync.h"

namespace sluice {
namespace {

// A latch the jobs wait on, so that the test decides when they finish.
class Gate {
 public:
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
    cv_.SignalAll();
  }
  void Pass() {
    MutexLock lock(&mu_);
    ++waiting_;
    cv_.SignalAll();
    while (!open_) cv_.Wait(&mu_);
  }
  // Waits (up to 20 s) until n jobs are inside Pass().
  bool AwaitWaiting(int n) {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (waiting_ < n && absl::Now() < deadline) cv_.WaitUntil(&mu_, deadline);
    return waiting_ >= n;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST(PrepQueue, JobsRunOffTheCallersThreadAndAtMostMaxPendingAreTaken) {
  constexpr int kMax = 3;
  Gate gate;
  Mutex mu;
  std::set<std::thread::id> threads;
  int ran = 0;
  {
    PrepQueue queue(kMax);
    for (int i = 0; i < kMax; ++i) {
      ASSERT_TRUE(queue.TrySubmit([&] {
        {
          MutexLock lock(&mu);
          threads.insert(std::this_thread::get_id());
        }
        gate.Pass();
        MutexLock lock(&mu);
        ++ran;
      }));
    }
    // Every job is waiting or running: the next is refused, whatever the arena's concurrency.
    EXPECT_FALSE(queue.TrySubmit([] {}));
    ASSERT_TRUE(gate.AwaitWaiting(std::min(kMax, PrepQueue::Concurrency())));
    gate.Open();
    queue.WaitIdle();
    {
      MutexLock lock(&mu);
      EXPECT_EQ(ran, kMax);
      EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u) << "a job ran on the submitting thread";
    }
    // Room again once they are done.
    std::atomic<bool> later{false};
    EXPECT_TRUE(queue.TrySubmit([&] { later = true; }));
    queue.WaitIdle();
    EXPECT_TRUE(later.load());
  }  // the destructor waits for what was submitted
}

TEST(PrepQueue, DestructorWaitsForSubmittedJobs) {
  std::atomic<int> ran{0};
  {
    PrepQueue queue(64);
    for (int i = 0; i < 64; ++i) ASSERT_TRUE(queue.TrySubmit([&] { ran.fetch_add(1); }));
  }
  EXPECT_EQ(ran.load(), 64);
}

}  // namespace
}  // namespace sluice
