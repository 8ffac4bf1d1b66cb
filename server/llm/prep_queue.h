// Where a generation call's input-sized work runs — the chat template, tokenizing, the limits that need token ids,
// the hand-off to the engine — so that HTTP event-loop and gRPC threads never do work that grows with a prompt.
// Every PrepQueue submits to one process-wide oneTBB task_arena of bounded concurrency (half the hardware threads,
// at least one), so a burst of long prompts occupies a bounded number of cores whatever the number of models and
// connections; each queue also bounds how many of its jobs wait or run at once (its owner refuses the rest).
// Thread-safety: TrySubmit and WaitIdle are safe from any thread; jobs run on the arena's threads, one job per
// task, never under the queue's lock.
#pragma once

#include <deque>
#include <functional>

#include "backend/base/sync.h"

namespace sluice {

class PrepQueue {
 public:
  explicit PrepQueue(int max_pending) : max_pending_(max_pending) {}
  PrepQueue(const PrepQueue&) = delete;
  PrepQueue& operator=(const PrepQueue&) = delete;
  ~PrepQueue() { WaitIdle(); }

  // False (the job is not taken) when max_pending jobs are already waiting or running.
  bool TrySubmit(std::function<void()> job);
  // Returns once every job submitted so far has run.
  void WaitIdle();
  // The process-wide arena's concurrency.
  static int Concurrency();

 private:
  void RunOne();

  const int max_pending_;
  Mutex mu_;
  CondVar idle_cv_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // submitted, not yet finished
};

}  // namespace sluice
