// Audio decoding and resampling off the gRPC threads: a oneTBB arena of fixed concurrency runs the decodes, with
// bounded admission. At most `concurrency` decodes run at once and at most `max_waiting` more wait for a thread,
// oldest first; the admitted decodes' estimated peak memory (DecodePeakBytes) stays within `max_bytes`, except that
// one decode is always admitted when none is (its size is already bounded by the model's max_audio_seconds).
// Beyond either bound Submit refuses with ResourceExhausted naming it, and nothing is queued. A waiting decode can
// be taken back (Withdraw: its call was cancelled or its deadline passed, which gRPC reports as a cancellation):
// its slot and bytes are given back at once rather than when a thread reaches it.
// (The process's oneTBB worker threads are shared: fewer than `concurrency` may run when the machine has fewer
// cores, e.g. one on a 2-core machine.)
// Thread-safety: Submit and Withdraw may be called from any thread; the work runs on a oneTBB worker thread and
// must not wait for other decodes. Lock order: a caller's own lock may be held around Submit and Withdraw (they
// take only mu_, briefly, and destroy a withdrawn work outside it).
#pragma once

#include <cstdint>
#include <functional>
#include <map>

#include <tbb/task_arena.h>
#include <tbb/task_group.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "backend/base/sync.h"

namespace sluice::voice {

struct DecodeLimits {
  int concurrency = 2;             // decodes running at once (the arena's concurrency)
  int max_waiting = 16;            // admitted beyond those, waiting for a thread
  int64_t max_bytes = int64_t{1} << 30;  // estimated peak memory of all admitted decodes
};

// Names one admitted work, for Withdraw. Never reused by an executor.
using DecodeTicket = uint64_t;

class DecodeExecutor {
 public:
  // REQUIRES: concurrency >= 1, max_waiting >= 0, max_bytes >= 0.
  explicit DecodeExecutor(const DecodeLimits& limits);
  // Waits for the admitted work (WaitIdle). noexcept: tbb::task_group's destructor throws only when not waited.
  ~DecodeExecutor() noexcept;
  DecodeExecutor(const DecodeExecutor&) = delete;
  DecodeExecutor& operator=(const DecodeExecutor&) = delete;

  // Admits `work`, which will hold about `bytes` at its peak, and runs it on the arena; or ResourceExhausted.
  absl::StatusOr<DecodeTicket> Submit(int64_t bytes, std::function<void()> work) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes back `ticket`'s work if no thread has started it: it will never run, it is destroyed on this thread,
  // and its slot and bytes are free for the next Submit on return. False when it has started (it then runs to its
  // end, as usual) or was taken back already.
  bool Withdraw(DecodeTicket ticket) ABSL_LOCKS_EXCLUDED(mu_);
  // Returns once every admitted work has run or been withdrawn. Not from inside a work.
  void WaitIdle();

  const DecodeLimits& limits() const { return limits_; }
  // Running and waiting works.
  int admitted() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Waiting {
    int64_t bytes = 0;
    std::function<void()> work;
  };

  // One arena task per Submit: it runs the oldest waiting work, or nothing when withdrawals emptied the queue
  // (there are never fewer tasks than waiting works).
  void RunOldest() ABSL_LOCKS_EXCLUDED(mu_);
  void Done(int64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);

  const DecodeLimits limits_;
  tbb::task_arena arena_;
  tbb::task_group group_;
  mutable Mutex mu_;
  int admitted_ ABSL_GUARDED_BY(mu_) = 0;    // running + waiting_.size()
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;  // of the admitted works
  DecodeTicket last_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<DecodeTicket, Waiting> waiting_ ABSL_GUARDED_BY(mu_);  // tickets grow: begin() is the oldest
};

}  // namespace sluice::voice
