// The dynamic batcher: the Scheduler for stateless models. One queue per length bucket; a batch closes when it
// reaches the bucket's most efficient compiled batch size (the best measured rows/s: the largest size on an
// accelerator, often a small one for long buckets on a CPU; the largest under batching.batch_size_policy:
// largest), when its oldest request has waited
// max_queue_delay, or earlier when waiting longer would miss the earliest deadline in the queue given the
// bucket's measured compute time.
// Splitting instead of padding: when all of a due bucket's requests run now (those left behind would be due too,
// waiting is futile, or the batcher is stopping) and their count is not a compiled size, they run as the cheapest
// split into compiled sizes by the measured estimates, oldest first: where compute grows with rows (a CPU, the
// sim's per-sample cost) 5 rows of a long bucket run as 4 + 1, not as 8 with 3 dummy rows; where a launch costs
// more than the dummy rows they stay one padded batch, as they do until every size of the bucket has an estimate
// or when the split would save under 3 %.
// Across buckets, the due batch whose first request is oldest (highest priority first) gets the next free
// instance. Expired requests leave their queue the moment they expire and never run.
//
// Filling under load (batching.max_fill_wait_ms; unset: 150 ms on accelerators, off on CPU instances, as measured at
// FillWaitMs in backend/base/model_config.h): a due partial batch lets a whole batch of another bucket (same or
// higher priority level) go first while it can afford to: after that batch's estimated compute, none of its
// requests will have waited longer than max_queue_delay + max_fill_wait, and each can still start by its deadline
// minus the partial batch's estimated compute. It never idles an instance (a whole batch runs instead), so at
// saturation long, rarely full buckets fill while short ones keep the device busy; below saturation nothing
// changes (no whole batch is waiting). Costs: those partial batches' requests wait longer.
//
// Not waiting for no one (batching.skip_futile_delay, on by default): a closed-loop client sends its next request
// only when an answer comes. When every request of the recent peak of unanswered ones (the most at once over the
// last 1-2 s) is queued here, none running or being answered, no answer is pending that could bring another, so a
// delay would only idle the instance: every non-empty bucket is due, the oldest goes first, and a bucket's whole
// queue goes as one padded batch. At 1 call in flight no request waits its delay; at N in flight a batch waits
// only until the other clients' requests are back. Open-loop traffic meets the condition only when all it has in
// flight is queued at its recent peak, and then starts one partial batch early.
//
// Waiting for the ones just answered (batching.await_returns, on by default; off with max_queue_delay 0 and on CPU
// instances, where the graphs share the cores with the threads bringing the requests: measured a loss): when the
// traffic is seen to be closed-loop (scheduler/return_tracker.h: most answered rows' next requests arrive within
// 3 ms of their batch's end), a partial batch due by its delay does not start right after a batch ends: it waits
// the measured usual return gap for those clients' next requests, which join it or fill another batch, so the next
// launch serves more rows (a closed loop of 4 calls on the sim's mix: batches of 1.4 rows on average otherwise).
// Not when the gap is as long as a launch of the bucket's graph (its measured batch times extrapolated to zero
// rows), nor past what a deadline allows, nor when a whole batch's worth is queued in all (the returns are then a
// small part of what fills one, measured at 16 calls in flight); whole batches, futile waits and stopping never
// wait; when every answered client is back it starts.
//
// Double buffering: while every instance is running a batch, the batcher forms up to one batch per instance
// ahead — the batch that goes next anyway, and only when it is whole (a partial batch is left to grow) — and an
// instance whose graph returns takes it at once, without a hop through the batcher thread; a batch formed ahead
// runs next even if higher-priority work arrives after it was formed; its requests are still cancelled and
// expire as queued ones do. Answering
// (scatter, callbacks) runs on a second thread per instance, so the device is not idle while it happens — except
// when the instance has nothing else to run (nothing formed ahead, nothing queued): then its executor thread
// answers at once, saving the hand-off.
//
// Fewer hops at low load: Enqueue itself gives a free instance the batch the batcher thread would form next when
// that work is due at once (a full batch, or max_queue_delay 0), and wakes that instance directly; the batcher
// thread is woken only while requests stay queued (delays, deadlines, expiry: answering expired requests is its
// job alone).
// Spinning for a lone caller (batching.idle_spin_us, 200 by default): while at most one request was unanswered at
// once over the last 1-2 s, an instance with nothing to run polls for its next batch that long (the lock released,
// yielding the CPU each round) before it sleeps, so the request a lone client sends on its answer starts without a
// thread wake-up. With more in flight it sleeps at once: the threads bringing that work need the CPU.
// A batch still running after batching.execution_timeout_ms is answered Unavailable by the batcher thread and
// its instance leaves rotation (scheduler.h).
//
// Threads: one batcher thread owns the timed decisions (Enqueue takes the immediate ones, under the same lock and
// by the same rules); per instance, an executor thread runs graphs and a finishing
// thread answers their requests. One mutex (mu_) guards all shared state; it is never held while a graph runs
// or a callback is called (only the injected Clock is called under it, which reads time and waits; see
// clock.h).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"

namespace sluice {

struct DynamicBatcherOptions {
  const ModelConfig* model = nullptr;  // must outlive the batcher
  std::vector<Backend*> instances;     // not owned; must outlive the batcher
  Clock* clock = &Clock::Real();
  BatchObserver on_batch;              // optional
};

absl::StatusOr<std::unique_ptr<Scheduler>> CreateDynamicBatcher(const DynamicBatcherOptions& options);

}  // namespace sluice
