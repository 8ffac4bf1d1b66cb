#include "server/llm/prep_queue.h"

#include <algorithm>
#include <thread>
#include <utility>

#include <tbb/task_arena.h>

// ThreadSanitizer cannot see oneTBB's synchronisation (Debian's libtbb is not instrumented), so a worker's first
// touch of this queue (its mutex included) would look unordered with the queue's construction. The hand-off is
// stated to TSan explicitly: release before each enqueue, acquire when the task starts. No-ops otherwise.
#if defined(__SANITIZE_THREAD__)
#define SLUICE_PREP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SLUICE_PREP_TSAN 1
#endif
#endif
#ifdef SLUICE_PREP_TSAN
#include <sanitizer/tsan_interface.h>
#define SLUICE_HAND_OVER(p) __tsan_release(p)
#define SLUICE_TAKE_OVER(p) __tsan_acquire(p)
#else
#define SLUICE_HAND_OVER(p) (void)(p)
#define SLUICE_TAKE_OVER(p) (void)(p)
#endif

namespace sluice {
namespace {

tbb::task_arena& Arena() {
  // No slot reserved for an application thread: nobody joins this arena, its workers run every job.
  static tbb::task_arena* arena = new tbb::task_arena(PrepQueue::Concurrency(), /*reserved_for_masters=*/0);
  return *arena;
}

}  // namespace

int PrepQueue::Concurrency() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency() / 2)); }

bool PrepQueue::TrySubmit(std::function<void()> job) {
  {
    MutexLock lock(&mu_);
    if (pending_ >= max_pending_) return false;
    ++pending_;
    jobs_.push_back(std::move(job));
  }
  // One task per job; the task takes the oldest job, so jobs start in submission order. enqueue (not spawn): it
  // runs even though no thread waits in the arena.
  SLUICE_HAND_OVER(this);
  Arena().enqueue([this] {
    SLUICE_TAKE_OVER(this);
    RunOne();
  });
  return true;
}

void PrepQueue::RunOne() {
  std::function<void()> job;
  {
    MutexLock lock(&mu_);
    job = std::move(jobs_.front());
    jobs_.pop_front();
  }
  job();
  job = nullptr;  // what the job holds (a sink, a prompt) goes before the queue says it is idle
  MutexLock lock(&mu_);
  --pending_;
  idle_cv_.SignalAll();
}

void PrepQueue::WaitIdle() {
  MutexLock lock(&mu_);
  while (pending_ > 0) idle_cv_.Wait(&mu_);
}

}  // namespace sluice
