#include "scheduler/dynamic_batcher.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "scheduler/batch_assembly.h"
#include "scheduler/bucket_queue.h"
#include "scheduler/bucket_table.h"
#include "scheduler/enqueue_check.h"
#include "scheduler/return_tracker.h"
#include "backend/base/sync.h"
#include "backend/base/unshared_status.h"

namespace sluice {
namespace {

using Queued = std::unique_ptr<QueuedRequest>;

struct FormedBatch {
  size_t bucket = 0;
  int batch_size = 0;
  std::vector<Queued> requests;
};

// A batch its backend has returned from, on its way to the instance's finishing thread.
struct ExecutedBatch {
  FormedBatch batch;
  absl::StatusOr<BatchResult> result;
  absl::Time start, assembled, executed;
};

class DynamicBatcher final : public Scheduler {
 public:
  explicit DynamicBatcher(const DynamicBatcherOptions& options)
      : model_(*options.model),
        clock_(*options.clock),
        table_(options.model->buckets),
        max_delay_(absl::Microseconds(options.model->batching.max_queue_delay_ms * 1000.0)),
        largest_batches_(options.model->batching.batch_size_policy ==
                         BatchingOptions::BatchSizePolicy::kLargest),
        fill_wait_(absl::Microseconds(FillWaitMs(*options.model) * 1000.0)),
        skip_futile_delay_(options.model->batching.skip_futile_delay),
        // Not on CPU instances: there the graphs share the cores with the threads that bring the clients' next
        // requests. Measured with the rule forced on (asr_ctc graphs, 4 calls in flight, 4 repeats in ABBA order):
        // 71-80 req/s against 86-88 without it, p99 192-338 ms against 147-168; the sim gained 5 % (same design:
        // 173-176 against 165-166 req/s, p99 level).
        await_returns_(options.model->batching.await_returns && max_delay_ > absl::ZeroDuration() &&
                       !options.model->has_cpu_instances()),
        idle_spin_(std::chrono::microseconds(options.model->batching.idle_spin_us)),
        execution_timeout_(options.model->batching.execution_timeout_ms > 0
                               ? absl::Microseconds(options.model->batching.execution_timeout_ms * 1000.0)
                               : absl::InfiniteDuration()),
        on_batch_(options.on_batch) {
    for (size_t b = 0; b < table_.num_buckets(); ++b) queues_.emplace_back(model_.batching.priority_levels);
    estimates_.assign(table_.num_buckets(), std::vector<absl::Duration>(table_.batch_sizes().size()));
    SeedEstimatesFromWarmup(*options.instances.front());
    for (Backend* backend : options.instances) {
      slots_.push_back(std::make_unique<InstanceSlot>(backend, static_cast<int>(slots_.size())));
    }
    {
      MutexLock lock(&mu_);
      slot_work_.resize(slots_.size());
      in_rotation_ = static_cast<int>(slots_.size());
    }
    for (auto& slot : slots_) {
      slot->thread = std::thread([this, s = slot.get()] { ExecutorLoop(*s); });
      slot->finisher = std::thread([this, s = slot.get()] { FinisherLoop(*s); });
    }
    batcher_thread_ = std::thread([this] { BatcherLoop(); });
  }

  // Waits for every instance thread, a hung one included (Stop does not: see StopOnce).
  ~DynamicBatcher() override {
    Stop();
    for (auto& slot : slots_) {
      if (slot->thread.joinable()) slot->thread.join();
    }
  }

  absl::StatusOr<RequestId> Enqueue(InferRequest request) override {
    if (absl::Status valid = CheckEnqueueShape(model_, request); !valid.ok()) return valid;
    absl::StatusOr<size_t> bucket = table_.BucketFor(request.length);
    if (!bucket.ok()) return bucket.status();
    const int levels = model_.batching.priority_levels;
    if (request.priority < 0 || request.priority > levels) {
      return absl::InvalidArgumentError(
          absl::StrCat("priority ", request.priority, " is outside 0..", levels, " (1 is the highest)"));
    }
    const absl::Time now = clock_.Now();
    if (request.deadline <= now) return absl::DeadlineExceededError("the request's deadline passed before it queued");

    auto queued = std::make_unique<QueuedRequest>();
    queued->level = request.priority == 0 ? model_.batching.default_priority_level : request.priority;
    queued->request = std::move(request);
    queued->enqueued = now;
    MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError(absl::StrCat("model ", model_.name, " is draining"));
    if (in_rotation_ == 0) return NoInstanceLeft();
    if (queued_ + prepared_rows_ >= model_.batching.max_queue_size) {  // formed-ahead batches still wait
      return absl::ResourceExhaustedError(absl::StrCat("model ", model_.name, " queue is full (max_queue_size ",
                                                       model_.batching.max_queue_size, ")"));
    }
    const RequestId id = queued->id = next_id_++;
    bucket_of_[id] = *bucket;
    queues_[*bucket].Push(std::move(queued));
    ++queued_;
    ++in_flight_;
    ++unanswered_;
    NotePeakUnansweredLocked(now);
    if (await_returns_) returns_.NoteArrival(now);  // read only by that rule: no cost on this path without it
    // The hop cut: with an instance free, the decision the batcher thread would take next is taken here, and the
    // instance is woken directly (one thread hand-off fewer per request at low load). Work that expired is left
    // to the batcher thread, which answers it (on_done never runs on an Enqueue caller's thread).
    AssignFreeInstancesLocked(now, /*unless_expired=*/true);
    if (queued_ > 0) batcher_cv_.Signal();  // what is still queued needs the batcher's timing (delays, deadlines)
    return id;
  }

  void Cancel(RequestId id) override {
    Queued removed;
    {
      MutexLock lock(&mu_);
      auto it = bucket_of_.find(id);
      if (it != bucket_of_.end()) {
        removed = queues_[it->second].Remove(id);
        bucket_of_.erase(it);
        if (removed) --queued_;
      } else if (std::vector<Queued> formed = TakeFromPreparedLocked([id](const QueuedRequest& q) { return q.id == id; });
                 !formed.empty()) {
        removed = std::move(formed.front());
      }
    }
    if (!removed) return;
    std::vector<Queued> one;
    one.push_back(std::move(removed));
    AnswerUnrun(std::move(one), absl::CancelledError("the request was cancelled while queued"));
  }

  void Stop() override { std::call_once(stop_once_, [this] { StopOnce(); }); }

  void StopOnce() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;  // from now on every non-empty queue is due: drain without waiting for delays
      batcher_cv_.Signal();
      while (in_flight_ > 0) idle_cv_.Wait(&mu_);
      shutdown_ = true;
      batcher_cv_.Signal();
      for (auto& slot : slots_) {
        slot->assigned_flag.store(true, std::memory_order_release);
        slot->cv.Signal();
        slot->finish_cv.Signal();
      }
    }
    batcher_thread_.join();
    // An instance whose execution timed out may never come back from its backend: Stop does not wait for it
    // (its requests were answered), the destructor does. sluice-server exits without destroying its models.
    std::vector<bool> hung;
    {
      MutexLock lock(&mu_);
      for (const SlotWork& work : slot_work_) hung.push_back(work.executing != nullptr);
    }
    for (size_t i = 0; i < slots_.size(); ++i) {
      slots_[i]->finisher.join();
      if (!hung[i]) slots_[i]->thread.join();
    }
  }

  int64_t InFlight() const override {
    MutexLock lock(&mu_);
    return in_flight_;
  }

  int64_t QueueDepth() const override {
    MutexLock lock(&mu_);
    return queued_ + prepared_rows_;
  }

  int InstancesInRotation() const override {
    MutexLock lock(&mu_);
    return in_rotation_;
  }

  const ModelConfig& model() const override { return model_; }

 private:
  // One instance and its thread; fixed after construction. What it shares with the batcher thread is its
  // SlotWork in slot_work_, under mu_.
  struct InstanceSlot {
    InstanceSlot(Backend* b, int i) : backend(b), index(i), description(b->Describe()) {}
    Backend* const backend;
    const int index;
    // Taken once, before serving: error messages built under mu_ use it instead of calling into the backend there
    // (a hung backend's Describe() might block on the very lock its Execute holds).
    const std::string description;
    std::thread thread;    // runs the backend (ExecutorLoop)
    std::thread finisher;  // answers executed batches (FinisherLoop)
    CondVar cv;            // a batch was assigned, or shutdown
    CondVar finish_cv;     // an executed batch to answer, or shutdown
    // Set with every assignment (and at shutdown), under mu_; what a spinning executor polls without the lock.
    std::atomic<bool> assigned_flag{false};
  };
  struct SlotWork {
    bool busy = false;                    // from assignment until its executor has nothing more to run
    bool out_of_rotation = false;         // its device is gone or hung: never given another batch
    std::optional<FormedBatch> assigned;  // handed over by the batcher, taken by the instance thread
    // While the backend runs a batch: that batch (owned by the instance thread, which does not touch its
    // requests until Execute returns and it has checked timed_out under mu_) and when Execute started. The
    // batcher thread answers the requests itself once execution_timeout has passed.
    FormedBatch* executing = nullptr;
    absl::Time executing_since;
    bool timed_out = false;
    // Executed, not yet answered (the finishing thread's work; at most a couple). A vector, not a deque: its
    // move is noexcept, which slot_work_'s resize needs.
    std::vector<ExecutedBatch> to_finish;
  };

  // The last warm-up run of each bucket gives the first compute estimate, until real runs replace it.
  void SeedEstimatesFromWarmup(const Backend& backend) {
    MutexLock lock(&mu_);
    for (const BucketLoadStats& s : backend.load_stats()) {
      auto b = table_.BucketFor(s.length);
      const size_t k = table_.BatchSizeIndex(s.batch_size);
      if (b.ok() && table_.batch_sizes()[k] == s.batch_size) estimates_[*b][k] = absl::Seconds(s.steady_seconds);
    }
  }

  absl::Duration EstimateLocked(size_t bucket, int batch_size) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return estimates_[bucket][table_.BatchSizeIndex(batch_size)];
  }

  // The largest batch worth forming in this bucket: the compiled size with the best measured rows/s (ties
  // within 5 % go to the larger size). On accelerators that is the largest size; on a CPU, long buckets often
  // run fastest per row at small sizes. Until every size has an estimate, the largest size; always the largest
  // under `batch_size_policy: largest`.
  int EfficientBatchSizeLocked(size_t bucket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (largest_batches_) return table_.max_batch_size();
    // Called for every due bucket on every decision (Enqueue included): two passes, no allocation.
    const auto& sizes = table_.batch_sizes();
    const std::vector<absl::Duration>& batch_times = estimates_[bucket];
    double best = 0;
    for (size_t k = 0; k < sizes.size(); ++k) {
      if (batch_times[k] <= absl::ZeroDuration()) return table_.max_batch_size();
      best = std::max(best, sizes[k] / absl::ToDoubleSeconds(batch_times[k]));
    }
    for (size_t k = sizes.size(); k-- > 0;) {
      if (sizes[k] / absl::ToDoubleSeconds(batch_times[k]) >= 0.95 * best) return sizes[k];
    }
    return table_.max_batch_size();
  }

  // When the bucket's next batch (skipping its first `skip` requests) must start: its oldest has waited max_wait
  // (max_queue_delay unless told), or a request's deadline less the batch's estimated compute.
  absl::Time ReadyTimeLocked(size_t bucket, size_t skip, std::optional<absl::Duration> max_wait = std::nullopt) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const BucketQueue& queue = queues_[bucket];
    const int n = static_cast<int>(std::min<size_t>(queue.size() - skip, EfficientBatchSizeLocked(bucket)));
    return queue.ReadyTime(skip, max_wait.value_or(max_delay_),
                           EstimateLocked(bucket, table_.BatchSizeFor(std::max(n, 1))));
  }

  // Whether the bucket holds a whole batch (of its efficient size).
  bool IsWholeLocked(size_t bucket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return static_cast<int>(queues_[bucket].size()) >= EfficientBatchSizeLocked(bucket);
  }

  bool IsDueLocked(size_t bucket, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const BucketQueue& queue = queues_[bucket];
    if (queue.empty()) return false;
    if (stopping_ || IsWholeLocked(bucket) || WaitingIsFutileLocked(now)) return true;
    return ReadyTimeLocked(bucket, 0) <= now && ReturnsAwaitedUntilLocked(bucket, now) <= now;
  }

  // What a launch of this bucket's graph costs beyond its rows: the measured batch times of its two smallest
  // compiled sizes, extrapolated to zero rows. Zero until both are measured, or where rows cost all (a CPU's
  // compute grows with rows: there one more row in a batch saves little).
  absl::Duration LaunchCostLocked(size_t bucket) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::vector<int>& sizes = table_.batch_sizes();
    if (sizes.size() < 2) return absl::ZeroDuration();
    const absl::Duration small = estimates_[bucket][0], larger = estimates_[bucket][1];
    if (small <= absl::ZeroDuration() || larger <= absl::ZeroDuration()) return absl::ZeroDuration();
    // Noise can make the larger size measure faster: then rows look free and the whole time is the launch.
    const absl::Duration per_row = std::max(absl::ZeroDuration(), (larger - small) / (sizes[1] - sizes[0]));
    return std::max(absl::ZeroDuration(), small - per_row * sizes[0]);
  }

  // batching.await_returns: until when a partial batch, due by its delay, waits for the closed-loop clients just
  // answered (their next requests may join it, or fill another batch); InfinitePast when it does not wait. The
  // tracker expects returns only for traffic seen to be closed-loop, within the measured usual gap of the last
  // batch's end. Not past what a deadline allows, and not when the usual gap is as long as a launch of the bucket's
  // graph (all that a row joining the batch can save).
  absl::Time ReturnsAwaitedUntilLocked(size_t bucket, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!await_returns_) return absl::InfinitePast();
    const absl::Time until = returns_.ReturnsExpectedBy(now);
    if (until <= now) return absl::InfinitePast();
    // With a whole batch's worth queued in all, what is here already makes full batches: the returns are a small
    // part of what could fill one, and waiting for them only idles the instance (measured: 16 calls in flight).
    if (queued_ >= EfficientBatchSizeLocked(bucket)) return absl::InfinitePast();
    if (returns_.usual_gap() >= LaunchCostLocked(bucket)) return absl::InfinitePast();
    if (ReadyTimeLocked(bucket, 0, absl::InfiniteDuration()) < until) return absl::InfinitePast();  // a deadline
    return until;
  }

  // batching.skip_futile_delay: every request of the recent peak of unanswered ones is queued here, none running
  // or being answered. A closed-loop client sends its next request when an answer comes, and no answer is pending,
  // so a delay cannot add rows: it would only idle the instance (at 1 call in flight, the whole delay per
  // request). Open-loop arrivals do not wait for answers; such traffic meets the condition only at a moment when
  // all it has in flight is queued at its recent peak, and then starts one partial batch a little early.
  bool WaitingIsFutileLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return skip_futile_delay_ && queued_ > 0 && queued_ == unanswered_ &&
           unanswered_ >= RecentPeakUnansweredLocked(now);
  }

  // The most requests unanswered at once over the last one to two seconds (the current and the previous window
  // of kPeakWindow): recent enough to follow a change of client count within seconds, long enough to span many
  // round trips of the clients it describes.
  static constexpr absl::Duration kPeakWindow = absl::Seconds(1);
  int64_t RecentPeakUnansweredLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Duration age = now - peak_window_start_;
    if (age >= 2 * kPeakWindow) return unanswered_;                         // both windows are over
    if (age >= kPeakWindow) return std::max(peak_current_, unanswered_);   // the current one became the previous
    return std::max({peak_current_, peak_previous_, unanswered_});
  }

  // Called whenever unanswered_ grows (only Enqueue grows it).
  void NotePeakUnansweredLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Duration age = now - peak_window_start_;
    if (age >= kPeakWindow) {
      peak_previous_ = age < 2 * kPeakWindow ? peak_current_ : 0;
      peak_current_ = 0;
      peak_window_start_ = now;
    }
    peak_current_ = std::max(peak_current_, unanswered_);
  }

  // Answers starting make waiting futile when the requests left are all queued: the batcher thread starts them
  // (it would otherwise sleep until their delay ends).
  void CountAnsweringLocked(size_t rows) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    unanswered_ -= static_cast<int64_t>(rows);
    if (WaitingIsFutileLocked(clock_.Now()) && FreeSlotLocked()) batcher_cv_.Signal();
  }

  // Whether bucket a's first request goes before bucket b's: highest priority level, then oldest.
  bool GoesBeforeLocked(size_t a, size_t b) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const QueuedRequest& x = queues_[a].Head();
    const QueuedRequest& y = queues_[b].Head();
    return std::tie(x.level, x.enqueued, x.id) < std::tie(y.level, y.enqueued, y.id);
  }

  // The due bucket whose first request goes first — unless that batch is partial and may wait to fill
  // (max_fill_wait_ms): then the first due whole batch of the same or a higher priority level goes instead.
  std::optional<size_t> PickBucketLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::optional<size_t> first, first_whole;
    for (size_t b = 0; b < queues_.size(); ++b) {
      if (!IsDueLocked(b, now)) continue;
      if (!first || GoesBeforeLocked(b, *first)) first = b;
      if (IsWholeLocked(b) && (!first_whole || GoesBeforeLocked(b, *first_whole))) first_whole = b;
    }
    if (first && first_whole && *first != *first_whole &&
        queues_[*first_whole].Head().level <= queues_[*first].Head().level &&
        MayWaitToFillLocked(*first, *first_whole, now)) {
      return first_whole;
    }
    return first;
  }

  // The fill rule: a partial batch may let `other` (a whole batch) run first while, even after other has run (from
  // when an instance can next start it, for its estimated compute), none of its requests has waited
  // max_queue_delay + max_fill_wait and none would be too late for its deadline (deadline - its own estimated
  // compute). Passing it over never idles an instance: other runs instead.
  bool MayWaitToFillLocked(size_t partial, size_t other, absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (fill_wait_ <= absl::ZeroDuration() || stopping_) return false;
    const absl::Time must_start = ReadyTimeLocked(partial, 0, max_delay_ + fill_wait_);
    return must_start >= NextStartLocked(now) + EstimateLocked(other, EfficientBatchSizeLocked(other));
  }

  // When an instance can start the next batch formed: now if one is free; otherwise when the first running batch
  // should end by its estimate, plus the batches already formed ahead, shared out over the instances.
  absl::Time NextStartLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (FreeSlotLocked() || in_rotation_ == 0) return now;
    absl::Time earliest = absl::InfiniteFuture();
    for (const SlotWork& work : slot_work_) {
      if (work.out_of_rotation) continue;
      absl::Time free_at = now;  // not executing: assembling or answering, about to be free
      if (const FormedBatch* running = work.executing) {
        free_at = std::max(now, work.executing_since + EstimateLocked(running->bucket, running->batch_size));
      }
      earliest = std::min(earliest, free_at);
    }
    absl::Duration ahead;
    for (const FormedBatch& batch : prepared_) ahead += EstimateLocked(batch.bucket, batch.batch_size);
    return earliest + ahead / in_rotation_;
  }

  // Takes a batch from a due bucket. Prefers an exactly compiled size (no dummy rows) when the requests left
  // behind are not due yet themselves; otherwise all of them run now, as the cheapest split into compiled sizes
  // (CheapestFirstTakeLocked: one padded batch unless splitting saves compute).
  FormedBatch FormBatchLocked(size_t bucket, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    BucketQueue& queue = queues_[bucket];
    int n = static_cast<int>(std::min<size_t>(queue.size(), EfficientBatchSizeLocked(bucket)));
    const int exact = table_.LargestBatchSizeAtMost(n);
    if (exact > 0 && exact < n) {
      // When waiting is futile the rest would not wait either (it would idle the instance): it runs now.
      const bool rest_can_wait = !stopping_ && !WaitingIsFutileLocked(now) && ReadyTimeLocked(bucket, exact) > now;
      n = rest_can_wait ? exact : CheapestFirstTakeLocked(bucket, n);
    }
    FormedBatch batch{bucket, table_.BatchSizeFor(n), queue.TakeFront(n)};
    for (const Queued& q : batch.requests) bucket_of_.erase(q->id);
    queued_ -= n;
    return batch;
  }

  // How many of `n` requests of a bucket, all to run now, the next batch takes: the first batch of the cheapest
  // way, by the measured estimates, to run n rows as compiled batches. A dummy row is paid for only where it costs
  // less than another launch: where compute grows with rows (a CPU, the sim's per-sample cost), 5 rows of a long
  // bucket run as 4 + 1 rather than as 8 with 3 dummy rows; where a launch dominates, they still run as one batch
  // of 8. Takes all n (one padded batch) until every size of the bucket has an estimate, or when splitting saves
  // under kMinSplitSaving of the padded batch's time (estimates are smoothed measurements: noise must not split).
  static constexpr double kMinSplitSaving = 0.03;
  int CheapestFirstTakeLocked(size_t bucket, int n) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::vector<int>& sizes = table_.batch_sizes();
    std::vector<double> seconds(sizes.size());
    for (size_t k = 0; k < sizes.size(); ++k) {
      seconds[k] = absl::ToDoubleSeconds(estimates_[bucket][k]);
      if (seconds[k] <= 0) return n;
    }
    // cost[m]: least estimated time to run m rows; first[m]: rows its first batch takes. Sizes are tried largest
    // first and replaced only by a strictly cheaper way, so of equally cheap ways the one with the fewest
    // launches first wins.
    std::vector<double> cost(n + 1, 0.0);
    std::vector<int> first(n + 1, 0);
    for (int m = 1; m <= n; ++m) {
      cost[m] = std::numeric_limits<double>::infinity();
      for (size_t k = sizes.size(); k-- > 0;) {
        const int take = std::min(sizes[k], m);
        if (take < sizes[k] && k > 0 && sizes[k - 1] >= m) continue;  // a smaller size holds m: no padding past it
        const double c = seconds[k] + cost[m - take];
        if (c < cost[m]) {
          cost[m] = c;
          first[m] = take;
        }
      }
    }
    const double padded = seconds[table_.BatchSizeIndex(n)];
    return cost[n] < (1.0 - kMinSplitSaving) * padded ? first[n] : n;
  }

  absl::Time NextWakeLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Time next = absl::InfiniteFuture();
    for (size_t b = 0; b < queues_.size(); ++b) {
      if (queues_[b].empty()) continue;
      next = std::min(next, queues_[b].EarliestDeadline());  // expiry, whether or not an instance is free
      if (!IsDueLocked(b, now)) {
        next = std::min(next, std::max(ReadyTimeLocked(b, 0), ReturnsAwaitedUntilLocked(b, now)));
      }
    }
    for (const SlotWork& work : slot_work_) {
      if (work.executing != nullptr && !work.timed_out) next = std::min(next, work.executing_since + execution_timeout_);
    }
    for (const FormedBatch& batch : prepared_) {
      for (const Queued& q : batch.requests) next = std::min(next, q->request.deadline);
    }
    return next;
  }

  // The index of an instance with no batch, if any.
  std::optional<size_t> FreeSlotLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < slot_work_.size(); ++i) {
      if (!slot_work_[i].busy && !slot_work_[i].out_of_rotation) return i;
    }
    return std::nullopt;
  }

  void BatcherLoop() {
    MutexLock lock(&mu_);
    while (!shutdown_) {
      const absl::Time now = clock_.Now();
      std::vector<Queued> expired;
      for (auto& queue : queues_) {
        for (Queued& q : queue.TakeExpired(now)) {
          bucket_of_.erase(q->id);
          --queued_;
          expired.push_back(std::move(q));
        }
      }
      for (Queued& q : TakeFromPreparedLocked([now](const QueuedRequest& q) { return q.request.deadline <= now; })) {
        expired.push_back(std::move(q));
      }
      if (!expired.empty()) {
        mu_.Unlock();
        AnswerUnrun(std::move(expired), absl::DeadlineExceededError("the request's deadline passed while queued"));
        mu_.Lock();
        continue;
      }
      if (TimeOutHungLocked(now)) continue;
      if (in_rotation_ == 0 && queued_ + prepared_rows_ > 0) {  // nothing can run them any more
        std::vector<Queued> stranded = TakeAllQueuedLocked();
        mu_.Unlock();
        AnswerUnrun(std::move(stranded), NoInstanceLeft());
        mu_.Lock();
        continue;
      }
      AssignFreeInstancesLocked(now, /*unless_expired=*/false);
      // Double buffering: while every instance runs a batch, form up to one batch per instance ahead, so an
      // instance takes its next batch the moment its backend returns, without a hop through this thread. Only
      // when the batch that goes next anyway (oldest due work first) is whole: a partial one is better left to
      // grow until an instance is free, and whole batches of a busy bucket must not overtake older partial
      // ones (that starved long, rarely full buckets: p99 doubled in loadtest/bench/accel_bench.sh).
      while (!FreeSlotLocked() && prepared_.size() < static_cast<size_t>(in_rotation_)) {
        std::optional<size_t> bucket = PickBucketLocked(now);
        if (!bucket || !IsWholeLocked(*bucket)) break;
        prepared_.push_back(FormBatchLocked(*bucket, now));
        prepared_rows_ += static_cast<int>(prepared_.back().requests.size());
      }
      // A call-out under mu_, by design: the clock waits on our condition variable (Clock's contract: it
      // only waits and reads time, never calls back into the scheduler).
      planned_wake_ = NextWakeLocked(now);
      clock_.WaitUntil(batcher_cv_, mu_, planned_wake_);
      planned_wake_ = absl::InfinitePast();  // awake: it recomputes before it waits again
    }
  }

  // Gives each free instance the batch that goes next: a batch formed ahead first, else a batch of the due bucket
  // whose first request goes first. With unless_expired (Enqueue's caller thread), stops at a bucket holding an
  // expired request: answering it is the batcher thread's job.
  void AssignFreeInstancesLocked(absl::Time now, bool unless_expired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (std::optional<size_t> free = FreeSlotLocked()) {
      if (!prepared_.empty()) {
        slot_work_[*free].assigned = TakePreparedLocked();
      } else {
        std::optional<size_t> bucket = PickBucketLocked(now);
        if (!bucket || (unless_expired && queues_[*bucket].EarliestDeadline() <= now)) return;
        slot_work_[*free].assigned = FormBatchLocked(*bucket, now);
      }
      slot_work_[*free].busy = true;
      slots_[*free]->assigned_flag.store(true, std::memory_order_release);
      slots_[*free]->cv.Signal();
    }
  }

  // Removes the requests formed ahead for which `take` is true (cancelled, expired): they never ran, and are
  // answered as queued ones are. A batch left empty is dropped; a smaller one runs at the smallest compiled size
  // that holds its rows.
  std::vector<Queued> TakeFromPreparedLocked(const std::function<bool(const QueuedRequest&)>& take)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Queued> taken;
    for (auto batch = prepared_.begin(); batch != prepared_.end();) {
      std::vector<Queued> kept;
      for (Queued& q : batch->requests) (take(*q) ? taken : kept).push_back(std::move(q));
      batch->requests = std::move(kept);
      if (batch->requests.empty()) {
        batch = prepared_.erase(batch);
        continue;
      }
      batch->batch_size = table_.BatchSizeFor(static_cast<int>(batch->requests.size()));
      ++batch;
    }
    prepared_rows_ -= static_cast<int>(taken.size());
    return taken;
  }

  // For good: its device is gone or an execution hung. Idempotent.
  void TakeOutOfRotationLocked(SlotWork& work) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (work.out_of_rotation) return;
    work.out_of_rotation = true;
    --in_rotation_;
  }

  FormedBatch TakePreparedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    FormedBatch batch = std::move(prepared_.front());
    prepared_.pop_front();
    prepared_rows_ -= static_cast<int>(batch.requests.size());
    return batch;
  }

  // The instance's executor: assembles and runs one batch after another and hands each to the finishing thread,
  // taking its next batch straight from prepared_ when the batcher formed one ahead.
  void ExecutorLoop(InstanceSlot& slot) {
    std::optional<FormedBatch> next;
    while (true) {
      {
        MutexLock lock(&mu_);
        SlotWork& work = slot_work_[slot.index];
        if (!next) {
          if (!work.assigned && !shutdown_) SpinForWorkLocked(slot);
          while (!work.assigned && !shutdown_) slot.cv.Wait(&mu_);
          slot.assigned_flag.store(false, std::memory_order_relaxed);
          if (!work.assigned) return;
          next = std::move(*work.assigned);
          work.assigned.reset();
        }
      }
      ExecutedBatch done = Execute(slot, std::move(*next));
      next.reset();
      MutexLock lock(&mu_);
      SlotWork& work = slot_work_[slot.index];
      if (work.timed_out) continue;  // answered by TimeOutHungLocked; out of rotation: waits for shutdown
      if (done.result.status().code() == absl::StatusCode::kUnavailable) TakeOutOfRotationLocked(work);  // gone
      // Updated before the instance looks free, so the next decision for this bucket already uses it. Smoothed
      // so one slow outlier does not close every later batch early. Gather + graph only: answering happens off
      // this path (on the finishing thread).
      absl::Duration& estimate = estimates_[done.batch.bucket][table_.BatchSizeIndex(done.batch.batch_size)];
      const absl::Duration batch_time = done.executed - done.start;
      estimate = estimate == absl::ZeroDuration() ? batch_time : (estimate * 0.8 + batch_time * 0.2);
      if (await_returns_) returns_.NoteExecuted(done.executed, static_cast<int>(done.batch.requests.size()));
      if (work.to_finish.empty() && prepared_.empty() && queued_ == 0) {
        // Nothing for this instance to run next: answering here costs the device nothing and saves the hop to
        // the finishing thread (the instance stays busy meanwhile; a request arriving now waits for it).
        AnswerLocked(slot, done);
      } else {
        work.to_finish.push_back(std::move(done));
        slot.finish_cv.Signal();
      }
      if (!work.out_of_rotation && !prepared_.empty()) {
        next = TakePreparedLocked();
      } else {
        work.busy = false;
        // Work that came due while this instance was busy (e.g. the request a client sent on receiving the answer
        // just given here) is taken now, without a hop through the batcher thread.
        if (!work.out_of_rotation) AssignFreeInstancesLocked(clock_.Now(), /*unless_expired=*/true);
      }
      // A free instance, or room to form another batch ahead: news for the batcher only if work waits (or this
      // instance left rotation, which may strand what waits).
      if (queued_ + prepared_rows_ > 0 || work.out_of_rotation) batcher_cv_.Signal();
    }
  }

  // batching.idle_spin_us: with one caller at a time (the recent peak of unanswered requests at most 1), the next
  // request comes from outside the server, and waking a sleeping thread for it costs more than the request itself
  // on a VM (issue 31: a zero-cost model at 1 call in flight served 0.64 of a bare gRPC echo, 0.82 spinning). So the
  // executor polls, mu_ released and yielding the CPU each round, until a batch is assigned or idle_spin_ passes.
  // With more in flight it sleeps at once: the threads bringing the next requests need the CPU it would take
  // (spinning at 8 in flight served 0.79 instead of 1.00 of the echo on this 2-core machine). Real time, not
  // clock_: the spin is about thread wake-ups, which a fake clock does not model.
  void SpinForWorkLocked(InstanceSlot& slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (idle_spin_ <= std::chrono::microseconds::zero() || RecentPeakUnansweredLocked(clock_.Now()) > 1) return;
    mu_.Unlock();
    const auto until = std::chrono::steady_clock::now() + idle_spin_;
    while (!slot.assigned_flag.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < until) {
      sched_yield();
    }
    mu_.Lock();
  }

  // Assembles and runs one batch. No lock is held while the backend runs.
  ExecutedBatch Execute(const InstanceSlot& slot, FormedBatch batch) {
    std::vector<const InferRequest*> requests;
    for (const Queued& q : batch.requests) requests.push_back(&q->request);
    ExecutedBatch done;
    done.start = clock_.Now();
    const PaddedBatch padded = AssembleBatch(model_, requests, batch.batch_size, table_.length(batch.bucket));
    done.assembled = clock_.Now();
    done.batch = std::move(batch);
    {
      MutexLock lock(&mu_);
      slot_work_[slot.index].executing = &done.batch;
      slot_work_[slot.index].executing_since = done.assembled;
      // A new watchdog deadline: the batcher needs it only if it sleeps past it (awake, it recomputes anyway).
      if (execution_timeout_ != absl::InfiniteDuration() && done.assembled + execution_timeout_ < planned_wake_) {
        batcher_cv_.Signal();
      }
    }
    done.result = ExecuteContained(slot, padded);
    done.executed = clock_.Now();
    MutexLock lock(&mu_);
    slot_work_[slot.index].executing = nullptr;
    return done;
  }

  // The instance's finishing thread: answers executed batches in order, off the executor's path.
  void FinisherLoop(InstanceSlot& slot) {
    MutexLock lock(&mu_);
    while (true) {
      SlotWork& work = slot_work_[slot.index];
      while (work.to_finish.empty() && !shutdown_) slot.finish_cv.Wait(&mu_);
      if (work.to_finish.empty()) return;
      ExecutedBatch done = std::move(work.to_finish.front());
      work.to_finish.erase(work.to_finish.begin());
      AnswerLocked(slot, done);
    }
  }

  // Answers an executed batch with mu_ released meanwhile, then counts its requests out of in_flight_.
  void AnswerLocked(const InstanceSlot& slot, ExecutedBatch& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    CountAnsweringLocked(done.batch.requests.size());
    mu_.Unlock();
    Answer(slot, done);
    mu_.Lock();
    in_flight_ -= static_cast<int64_t>(done.batch.requests.size());
    idle_cv_.SignalAll();
  }

  // Reports the batch and answers its requests. No lock is held here.
  void Answer(const InstanceSlot& slot, ExecutedBatch& done) {
    FormedBatch& batch = done.batch;
    const int rows = static_cast<int>(batch.requests.size());
    const absl::StatusOr<BatchResult>& result = done.result;
    const absl::Duration compute = done.executed - done.assembled;
    if (on_batch_) {
      BatchReport report{slot.index, table_.length(batch.bucket), batch.batch_size, rows, 0, compute, result.ok()};
      for (const Queued& q : batch.requests) report.real_steps += q->request.length;
      on_batch_(report);
    }
    const absl::Time scatter_start = clock_.Now();
    std::vector<std::vector<HostTensor>> outputs;
    if (result.ok()) outputs = ScatterOutputs(model_, *result, rows);
    const absl::Time scattered = clock_.Now();
    for (int r = 0; r < rows; ++r) {
      InferResponse response;
      response.status = Unshared(result.status());  // each row's own rep (backend/base/unshared_status.h)
      if (result.ok()) response.outputs = std::move(outputs[r]);
      response.queue_time = done.start - batch.requests[r]->enqueued;
      response.input_time = done.assembled - done.start;
      response.compute_time = compute;
      response.output_time = scattered - scatter_start;
      response.batch_size = batch.batch_size;
      response.batch_rows_used = rows;
      response.bucket_length = table_.length(batch.bucket);
      batch.requests[r]->request.on_done(std::move(response));
    }
  }

  // The watchdog, on the batcher thread: a batch that has run longer than execution_timeout is answered
  // Unavailable now (retryable elsewhere) and its instance leaves rotation for good, as a gone device does (a
  // backend stuck inside a device call cannot be interrupted; its thread is left to return or not). Returns
  // whether it answered any (mu_ is released while answering).
  bool TimeOutHungLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (size_t i = 0; i < slot_work_.size(); ++i) {
      SlotWork& work = slot_work_[i];
      if (work.executing == nullptr || work.timed_out || now < work.executing_since + execution_timeout_) continue;
      work.timed_out = true;
      TakeOutOfRotationLocked(work);
      const FormedBatch& hung = *work.executing;
      const absl::Status status = absl::UnavailableError(absl::StrCat(
          "model ", model_.name, ", bucket (batch ", hung.batch_size, ", length ", table_.length(hung.bucket),
          "), instance ", i, " (", slots_[i]->description, "): execution did not finish within ",
          "execution_timeout_ms ", model_.batching.execution_timeout_ms, "; the instance is out of rotation"));
      BatchReport report{static_cast<int>(i), table_.length(hung.bucket), hung.batch_size,
                         static_cast<int>(hung.requests.size()), 0, now - work.executing_since, false};
      report.timed_out = true;
      std::vector<Queued> requests = std::move(work.executing->requests);
      work.executing->requests.clear();
      mu_.Unlock();
      if (on_batch_) on_batch_(report);
      AnswerUnrun(std::move(requests), status);  // takes mu_ to account for them
      mu_.Lock();
      batcher_cv_.Signal();
      return true;
    }
    return false;
  }

  absl::Status NoInstanceLeft() const {
    return absl::UnavailableError(absl::StrCat("model ", model_.name,
                                               " has no instance left in rotation (every instance's device failed)"));
  }

  std::vector<Queued> TakeAllQueuedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Queued> all;
    for (FormedBatch& batch : prepared_) {
      for (Queued& q : batch.requests) all.push_back(std::move(q));
    }
    prepared_.clear();
    prepared_rows_ = 0;
    for (BucketQueue& queue : queues_) {
      for (Queued& q : queue.TakeFront(queue.size())) {
        bucket_of_.erase(q->id);
        all.push_back(std::move(q));
      }
    }
    queued_ = 0;
    return all;
  }

  // The backend's Execute, with whatever goes wrong kept to this batch: an exception becomes Internal, and
  // every error names the model, the bucket and the instance (the backend's own message follows).
  absl::StatusOr<BatchResult> ExecuteContained(const InstanceSlot& slot, const PaddedBatch& padded) {
    absl::StatusOr<BatchResult> result = absl::InternalError("not run");
    try {
      result = slot.backend->Execute(padded);
    } catch (const std::exception& e) {
      result = absl::InternalError(absl::StrCat("the backend threw: ", e.what()));
    } catch (...) {
      result = absl::InternalError("the backend threw a non-standard exception");
    }
    if (result.ok()) return result;
    return absl::Status(result.status().code(),
                        absl::StrCat("model ", model_.name, ", bucket (batch ", padded.batch_size, ", length ",
                                     padded.length, "), instance ", slot.index, " (", slot.description,
                                     "): ", result.status().message()));
  }

  // Answers requests that never ran (expired, cancelled). Called without mu_ held.
  void AnswerUnrun(std::vector<Queued> requests, const absl::Status& status) {
    {
      MutexLock lock(&mu_);
      CountAnsweringLocked(requests.size());
    }
    const absl::Time now = clock_.Now();
    for (Queued& q : requests) {
      InferResponse response;
      response.status = Unshared(status);
      response.queue_time = now - q->enqueued;
      q->request.on_done(std::move(response));
    }
    MutexLock lock(&mu_);
    in_flight_ -= static_cast<int64_t>(requests.size());
    idle_cv_.SignalAll();
  }

  const ModelConfig& model_;
  const Clock& clock_;
  const BucketTable table_;
  const absl::Duration max_delay_;
  const bool largest_batches_;  // batch_size_policy: largest
  const absl::Duration fill_wait_;  // max_fill_wait_ms
  const bool skip_futile_delay_;
  const bool await_returns_;  // batching.await_returns, and max_queue_delay_ms > 0
  const std::chrono::microseconds idle_spin_;
  const absl::Duration execution_timeout_;  // InfiniteDuration when execution_timeout_ms is 0
  const BatchObserver on_batch_;

  mutable Mutex mu_;
  CondVar batcher_cv_;  // new work, a free instance, stop
  CondVar idle_cv_;     // in_flight_ decreased
  std::vector<BucketQueue> queues_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<RequestId, size_t> bucket_of_ ABSL_GUARDED_BY(mu_);  // queued request -> bucket
  std::vector<std::vector<absl::Duration>> estimates_ ABSL_GUARDED_BY(mu_);  // [bucket][batch size index]
  std::vector<SlotWork> slot_work_ ABSL_GUARDED_BY(mu_);                     // [instance index]
  std::deque<FormedBatch> prepared_ ABSL_GUARDED_BY(mu_);  // formed ahead while every instance was busy
  int prepared_rows_ ABSL_GUARDED_BY(mu_) = 0;
  RequestId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int queued_ ABSL_GUARDED_BY(mu_) = 0;
  int in_rotation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  // Accepted, not yet answered: in_flight_ less the requests whose answers are being delivered. A client's next
  // request can arrive while its last answer is still being counted out of in_flight_; this count does not lag.
  int64_t unanswered_ ABSL_GUARDED_BY(mu_) = 0;
  // skip_futile_delay's recent peak of unanswered_: the current window's, the previous window's, and when the
  // current one began (InfinitePast: none yet).
  int64_t peak_current_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t peak_previous_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time peak_window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // batching.await_returns: when answered clients come back (fed only while the rule is on).
  ReturnTracker returns_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  // While the batcher thread waits: the time it wakes at by itself; InfinitePast while it is awake.
  absl::Time planned_wake_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::once_flag stop_once_;

  std::vector<std::unique_ptr<InstanceSlot>> slots_;  // fixed after construction
  std::thread batcher_thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheduler>> CreateDynamicBatcher(const DynamicBatcherOptions& options) {
  if (options.model == nullptr) return absl::InvalidArgumentError("DynamicBatcherOptions.model is null");
  if (options.instances.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", options.model->name, " has no instances"));
  }
  if (options.clock == nullptr) return absl::InvalidArgumentError("DynamicBatcherOptions.clock is null");
  return std::make_unique<DynamicBatcher>(options);
}

}  // namespace sluice
