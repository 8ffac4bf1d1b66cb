#include "scheduler/continuous_batcher.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "scheduler/delivery_lane.h"
#include "scheduler/generation_shapes.h"
#include "scheduler/prefix_block_table.h"
#include "backend/sampler.h"
#include "backend/base/sync.h"
#include "backend/base/unshared_status.h"

namespace sluice {
namespace {

// A sequence's client side: its callbacks, run on its instance's DeliveryLane (or, never admitted, on the thread
// that answers it). `stopped`: on_token returned false (set on the lane, read by the engine, which finishes the
// sequence at its next iteration); `delivered`: on_token calls made, touched by the lane alone.
struct SequenceClient {
  TokenCallback on_token;
  GenerationDoneCallback on_done;
  std::atomic<bool> stopped{false};
  int delivered = 0;
};
using ClientPtr = std::shared_ptr<SequenceClient>;

// One accepted request. Waiting, it belongs to the batcher's queue (under mu_); once admitted, to the engine
// thread of its instance, which alone touches it until it is answered.
struct Sequence {
  SequenceId id = 0;
  GenerationRequest request;  // its callbacks moved into `client`
  ClientPtr client;
  absl::Time enqueued;
  std::mt19937_64 rng;     // seeded at Enqueue: the request's seed or a draw from the engine's generator
  int slot = -1;           // >= 0 while it holds a KV-cache slot
  bool admitted = false;
  int generated = 0;       // tokens sampled (handed to the client's lane)
  int32_t last_token = 0;  // the newest token: the next decode step feeds it
  int64_t prefilled = 0;   // chunked prefill: prompt positions [0, prefilled) are written into the slot
  // Prefix caching: the chain hashes of the prompt's full blocks (taken at Enqueue), how many of them are in the
  // block table, the hit taken at admission (its pins held until copies ran) and the positions it reused.
  std::vector<uint64_t> block_hashes;
  int registered_blocks = 0;
  std::optional<PrefixHit> pending_hit;
  int64_t cached_tokens = 0;
  absl::Duration queue_time;

  int64_t prompt_length() const { return static_cast<int64_t>(request.prompt.size()); }
  // The prompt occupies positions [0, n); generated token i is fed at position n + i.
  int64_t next_position() const { return prompt_length() + generated - 1; }
};
using SequencePtr = std::unique_ptr<Sequence>;

// A sequence that is done, and how.
struct Outcome {
  SequencePtr sequence;
  FinishReason reason = FinishReason::kStop;
  absl::Status status;
};

// An instance's free KV-cache slots; the lowest free one first, so that slot choice is deterministic.
class SlotPool {
 public:
  explicit SlotPool(int slots) {
    for (int s = 0; s < slots; ++s) free_.insert(s);
  }
  bool empty() const { return free_.empty(); }
  const std::set<int>& free() const { return free_; }
  int Take() {
    const int slot = *free_.begin();
    free_.erase(free_.begin());
    return slot;
  }
  void Take(int slot) { free_.erase(slot); }
  void Give(int slot) { free_.insert(slot); }

 private:
  std::set<int> free_;
};

// One backend instance and its engine thread. `running`, `admitted`, `prefilling` and `sampler` belong to that
// thread alone, except while a backend call is in flight (`executing`, under mu_): then the watchdog may take
// `running`, `admitted` and `prefilling` (under mu_, setting `timed_out`), and the engine thread, once the call returns, checks `timed_out`
// under mu_ before it touches them again. `slots` and `prefix` are used under mu_ only.
struct Instance {
  Instance(GenerationBackend* b, int i, const GenerationOptions& gen)
      : backend(b), index(i), slots(gen.kv_cache.slots) {
    if (gen.prefix_caching()) prefix.emplace(gen.kv_cache.slots, gen.context_length, gen.prefix_cache_block_size);
  }
  GenerationBackend* const backend;
  const int index;
  std::thread thread;
  std::vector<SequencePtr> running;   // prefilled, holding a slot, with a token to feed
  std::vector<SequencePtr> admitted;  // this iteration's, being prefilled (null: done with)
  std::vector<SequencePtr> prefilling;  // chunked prefill: holding a slot, prompt partly written; oldest first
  SlotPool slots;
  std::optional<PrefixBlockTable> prefix;  // prefix caching: which prompt blocks this instance's cache holds
  Sampler sampler;
  std::vector<float> masked;  // one logits row with suppressed ids excluded (Suppressed())
  // Tokens sampled since the last hand-over to `lane` (FlushOutbox), which runs the clients' callbacks in order.
  // The engine thread's, like `sampler`; the watchdog reads it (empty: every backend call starts with a hand-over)
  // only while the engine thread is inside a call.
  std::vector<std::pair<ClientPtr, GeneratedToken>> outbox;
  DeliveryLane lane;
  // Under the batcher's mu_:
  bool executing = false;      // a Prefill/Decode call is in flight
  absl::Time executing_since;  // when it started
  std::string graph;           // what it runs, for the timeout's message
  bool timed_out = false;      // the watchdog answered its sequences: out of rotation, the thread only exits
};

bool IsDeviceGone(const absl::Status& status) { return status.code() == absl::StatusCode::kUnavailable; }

}  // namespace

class ContinuousBatcher::Impl {
 public:
  explicit Impl(const ContinuousBatcherOptions& options)
      : model_(*options.model),
        gen_(*options.model->generation),
        clock_(*options.clock),
        observer_(options.observer),
        max_running_(MaxRunningPerInstance(gen_)),
        execution_timeout_(gen_.execution_timeout_ms > 0 ? absl::Microseconds(gen_.execution_timeout_ms * 1000.0)
                                                         : absl::InfiniteDuration()) {
    for (GenerationBackend* backend : options.instances) {
      descriptions_.push_back(backend->Describe());
      instances_.push_back(
          std::make_unique<Instance>(backend, static_cast<int>(instances_.size()), gen_));
    }
    {
      MutexLock lock(&mu_);
      engine_rng_.seed(options.seed);
      in_rotation_ = static_cast<int>(instances_.size());
    }
    for (auto& instance : instances_) {
      instance->thread = std::thread([this, in = instance.get()] { EngineLoop(*in); });
    }
    if (execution_timeout_ != absl::InfiniteDuration()) watchdog_ = std::thread([this] { WatchdogLoop(); });
  }

  // Waits for every engine thread, a hung one included (Stop does not: see StopOnce).
  ~Impl() {
    Stop();
    for (auto& instance : instances_) {
      if (instance->thread.joinable()) instance->thread.join();
    }
  }

  absl::StatusOr<SequenceId> Enqueue(GenerationRequest request) {
    if (absl::Status valid = CheckGenerationRequest(gen_, request); !valid.ok()) return valid;
    const absl::Time now = clock_.Now();
    if (request.deadline <= now) return absl::DeadlineExceededError("the request's deadline passed before it queued");
    auto sequence = std::make_unique<Sequence>();
    sequence->enqueued = now;
    sequence->client = std::make_shared<SequenceClient>();
    sequence->client->on_token = std::move(request.on_token);
    sequence->client->on_done = std::move(request.on_done);
    if (gen_.prefix_caching()) {  // hashed here, outside the lock
      sequence->block_hashes = PrefixBlockTable::ChainHashes(request.prompt, gen_.prefix_cache_block_size);
    }
    MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError(absl::StrCat("model ", model_.name, " is draining"));
    if (in_rotation_ == 0) return NoInstanceLeft();
    if (static_cast<int>(waiting_.size()) >= gen_.max_queue_size) {
      return absl::ResourceExhaustedError(absl::StrCat("model ", model_.name, " queue is full (max_queue_size ",
                                                       gen_.max_queue_size, ")"));
    }
    const SequenceId id = sequence->id = next_id_++;
    sequence->rng.seed(request.sampling.seed.has_value() ? *request.sampling.seed : engine_rng_());
    sequence->request = std::move(request);
    waiting_.push_back(std::move(sequence));
    ++in_flight_;
    work_cv_.SignalAll();
    return id;
  }

  void Cancel(SequenceId id) {
    std::vector<Outcome> removed;
    {
      MutexLock lock(&mu_);
      auto it = std::find_if(waiting_.begin(), waiting_.end(), [id](const SequencePtr& s) { return s->id == id; });
      if (it != waiting_.end()) {
        removed.push_back({std::move(*it), FinishReason::kCancelled,
                           absl::CancelledError("the sequence was cancelled while waiting")});
        waiting_.erase(it);
      } else if (running_on_.contains(id)) {
        cancelled_.insert(id);  // its engine thread finishes it at the start of its next iteration
        work_cv_.SignalAll();
      }
    }
    Finish(nullptr, removed);
  }

  void Stop() { std::call_once(stop_once_, [this] { StopOnce(); }); }

  int Waiting() const {
    MutexLock lock(&mu_);
    return static_cast<int>(waiting_.size());
  }
  int Running() const {
    MutexLock lock(&mu_);
    return running_;
  }
  int InstancesInRotation() const {
    MutexLock lock(&mu_);
    return in_rotation_;
  }
  int TotalSlots() const { return max_running_ * static_cast<int>(instances_.size()); }
  PrefixCacheCounters PrefixCache() const {
    PrefixCacheCounters sum;
    MutexLock lock(&mu_);
    for (const auto& instance : instances_) {
      if (!instance->prefix) continue;
      const PrefixCacheCounters c = instance->prefix->counters();
      sum.lookups += c.lookups;
      sum.hits += c.hits;
      sum.hit_blocks += c.hit_blocks;
      sum.evictions += c.evictions;
      sum.blocks_used += c.blocks_used;
      sum.blocks_total += c.blocks_total;
    }
    return sum;
  }
  const ModelConfig& model() const { return model_; }

 private:
  void StopOnce() {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
      work_cv_.SignalAll();
      while (in_flight_ > 0) idle_cv_.Wait(&mu_);
      shutdown_ = true;
      work_cv_.SignalAll();
      watchdog_cv_.SignalAll();
    }
    if (watchdog_.joinable()) watchdog_.join();
    // An instance whose call timed out may never come back from its backend: Stop does not wait for it (its
    // sequences were answered), the destructor does. sluice-server exits without destroying its models.
    std::vector<bool> hung;
    {
      MutexLock lock(&mu_);
      for (const auto& instance : instances_) hung.push_back(instance->timed_out);
    }
    for (size_t i = 0; i < instances_.size(); ++i) {
      if (!hung[i]) instances_[i]->thread.join();
    }
  }

  // The watchdog: a Prefill/Decode call running longer than execution_timeout has its instance's sequences
  // answered UNAVAILABLE now (retryable elsewhere) and the instance taken out of rotation for good, as a gone
  // device is (a backend stuck in a device call cannot be interrupted; its thread is left to return or not).
  void WatchdogLoop() {
    MutexLock lock(&mu_);
    while (!shutdown_) {
      const absl::Time now = clock_.Now();
      absl::Time next = absl::InfiniteFuture();
      bool answered = false;
      for (auto& instance : instances_) {
        Instance& in = *instance;
        if (!in.executing || in.timed_out) continue;
        if (now < in.executing_since + execution_timeout_) {
          next = std::min(next, in.executing_since + execution_timeout_);
          continue;
        }
        TimeOutLocked(in, now);
        answered = true;
        break;  // mu_ was released: look again
      }
      if (!answered) clock_.WaitUntil(watchdog_cv_, mu_, next);
    }
  }

  // REQUIRES: in's call is in flight and past the timeout. Releases mu_ while answering.
  void TimeOutLocked(Instance& in, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in.timed_out = true;
    const absl::Status hung = absl::UnavailableError(absl::StrCat(
        "model ", model_.name, ", ", in.graph, ", instance ", in.index, " (", descriptions_[in.index],
        "): the call did not finish within execution_timeout_ms ", gen_.execution_timeout_ms,
        "; the instance is out of rotation"));
    std::vector<Outcome> ended;
    for (std::vector<SequencePtr>* list : {&in.running, &in.admitted, &in.prefilling}) {
      for (SequencePtr& seq : *list) {
        if (seq != nullptr) ended.push_back({std::move(seq), FinishReason::kError, hung});
      }
      list->clear();
    }
    std::vector<Outcome> stranded = LeaveRotationLocked();
    GenerationStepReport report;
    report.instance = in.index;
    report.prefill = in.graph.rfind("prefill", 0) == 0;
    report.rows = static_cast<int>(ended.size());
    report.compute = now - in.executing_since;
    report.ok = false;
    report.timed_out = true;
    mu_.Unlock();
    Report(report);
    Finish(&in, ended);
    Finish(nullptr, stranded);
    mu_.Lock();
  }

  // One instance fewer; with none left, every waiting sequence (returned) is answered UNAVAILABLE.
  std::vector<Outcome> LeaveRotationLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Outcome> stranded;
    --in_rotation_;
    if (in_rotation_ == 0) {
      for (SequencePtr& seq : waiting_) stranded.push_back({std::move(seq), FinishReason::kError, NoInstanceLeft()});
      waiting_.clear();
    }
    work_cv_.SignalAll();
    return stranded;
  }

  // One engine thread: iterations until shutdown, or until its device is gone.
  void EngineLoop(Instance& in) {
    while (true) {
      std::vector<Outcome> ended;
      {
        MutexLock lock(&mu_);
        while (true) {
          const absl::Time now = clock_.Now();
          TakeExpiredWaitingLocked(now, ended);
          TakeEndedRunningLocked(in, now, ended);
          if (shutdown_ && ended.empty()) return;  // shutdown_ follows in_flight_ == 0: nothing is left
          in.admitted = AdmitLocked(in);
          if (gen_.chunked_prefill()) {  // admitted prompts are written chunk by chunk, from this iteration on
            for (SequencePtr& seq : in.admitted) in.prefilling.push_back(std::move(seq));
            in.admitted.clear();
          }
          if (!ended.empty() || !in.admitted.empty() || !in.running.empty() || !in.prefilling.empty()) break;
          // A call-out under mu_, by design: the clock only reads time and waits on our condition variable.
          clock_.WaitUntil(work_cv_, mu_, EarliestWaitingDeadlineLocked());
        }
      }
      Finish(&in, ended);
      StepResult step;
      if (gen_.chunked_prefill()) {
        step = RunChunkedIteration(in);
      } else {
        const StepResult prefills = RunPrefills(in);
        step = prefills == StepResult::kOk ? RunDecodeStep(in) : prefills;
      }
      if (step == StepResult::kTimedOut) return;  // the watchdog answered everything this instance held
      FlushOutbox(in);
      if (step == StepResult::kDeviceGone) {
        TakeOutOfRotation(in);
        return;
      }
    }
  }

  // Step 1 for the queue: waiting sequences whose deadline passed (any engine thread may answer them).
  void TakeExpiredWaitingLocked(absl::Time now, std::vector<Outcome>& ended) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if ((*it)->request.deadline > now) {
        ++it;
        continue;
      }
      ended.push_back({std::move(*it), FinishReason::kDeadline,
                       absl::DeadlineExceededError("the request's deadline passed while it waited")});
      it = waiting_.erase(it);
    }
  }

  // Step 1 for this instance: cancelled or expired running (or, chunked, part-prefilled) sequences leave, their
  // slots free at once.
  void TakeEndedRunningLocked(Instance& in, absl::Time now, std::vector<Outcome>& ended)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (std::vector<SequencePtr>* list : {&in.running, &in.prefilling}) {
      const char* doing = list == &in.running ? "generating" : "its prompt was being prefilled";
      auto keep = list->begin();
      for (SequencePtr& seq : *list) {
        if (cancelled_.contains(seq->id)) {
          ReleaseSlotLocked(in, *seq);
          ended.push_back(
              {std::move(seq), FinishReason::kCancelled, absl::CancelledError("the sequence was cancelled")});
        } else if (seq->client->stopped.load(std::memory_order_acquire)) {  // on_token returned false
          ReleaseSlotLocked(in, *seq);
          ended.push_back({std::move(seq), FinishReason::kStop, absl::OkStatus()});
        } else if (seq->request.deadline <= now) {
          ReleaseSlotLocked(in, *seq);
          ended.push_back({std::move(seq), FinishReason::kDeadline,
                           absl::DeadlineExceededError(absl::StrCat("the request's deadline passed while ", doing))});
        } else {
          *keep++ = std::move(seq);
        }
      }
      list->erase(keep, list->end());
    }
  }

  // Step 2: oldest first into free slots while the prompt tokens stay within the budget (the first always fits).
  // Chunked prefill: into every free slot (iteration_token_budget bounds the work, RunChunks).
  std::vector<SequencePtr> AdmitLocked(Instance& in) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<SequencePtr> admitted;
    int64_t tokens = 0;
    while (!waiting_.empty() && !in.slots.empty() &&
           static_cast<int>(in.running.size() + in.prefilling.size() + admitted.size()) < max_running_) {
      const int64_t prompt = waiting_.front()->prompt_length();
      if (!gen_.chunked_prefill() && !admitted.empty() && tokens + prompt > gen_.prefill_token_budget) break;
      int slot = -1;
      std::optional<PrefixHit> hit;
      if (in.prefix) {
        hit = LookUpPrefixLocked(in, *waiting_.front());
        slot = in.prefix->ChooseSlot(in.slots.free(), *hit);
        if (slot < 0) {  // every free slot holds a block a pending hit will copy: after this iteration's copies
          in.prefix->Unpin(*hit);
          break;
        }
      }
      SequencePtr seq = std::move(waiting_.front());
      waiting_.pop_front();
      tokens += prompt;
      if (hit) {
        in.slots.Take(slot);
        seq->slot = slot;
        ClaimPrefixLocked(in, *seq, std::move(*hit));
      } else {
        seq->slot = in.slots.Take();
      }
      seq->admitted = true;
      running_on_[seq->id] = in.index;
      ++running_;
      admitted.push_back(std::move(seq));
    }
    return admitted;
  }

  // The cached blocks of seq's prompt, pinned; never the whole prompt (its last position's logits are needed).
  PrefixHit LookUpPrefixLocked(Instance& in, const Sequence& seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto max_blocks = static_cast<int>((seq.prompt_length() - 1) / gen_.prefix_cache_block_size);
    return in.prefix->Lookup(seq.block_hashes, max_blocks);
  }

  // seq's slot is chosen: blocks of the hit that live in it are reused in place, the others are copied from
  // their slots before seq's first chunk (RunPendingCopies), their pins held until then.
  void ClaimPrefixLocked(Instance& in, Sequence& seq, PrefixHit hit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    in.prefix->CountLookup(hit);
    in.prefix->Claim(seq.slot, hit);
    seq.cached_tokens = seq.prefilled = hit.tokens(gen_.prefix_cache_block_size);
    seq.registered_blocks = static_cast<int>(hit.blocks.size());
    const bool copies = std::any_of(hit.blocks.begin(), hit.blocks.end(),
                                    [&](const CachedBlock& b) { return b.slot != seq.slot; });
    if (copies) {
      seq.pending_hit = std::move(hit);
    } else {
      in.prefix->Unpin(hit);
    }
  }

  // Enters seq's prompt blocks that are now fully written into the block table.
  void RegisterPrefixBlocks(Instance& in, Sequence& seq) {
    if (!in.prefix) return;
    const auto written = static_cast<int>(seq.prefilled / gen_.prefix_cache_block_size);
    MutexLock lock(&mu_);
    for (; seq.registered_blocks < written; ++seq.registered_blocks) {
      in.prefix->Register(seq.slot, seq.registered_blocks, seq.block_hashes[seq.registered_blocks]);
    }
  }

  absl::Time EarliestWaitingDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Time earliest = absl::InfiniteFuture();
    for (const SequencePtr& seq : waiting_) earliest = std::min(earliest, seq->request.deadline);
    return earliest;
  }

  void ReleaseSlotLocked(Instance& in, Sequence& seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (seq.pending_hit) {  // answered before its copies ran
      in.prefix->Unpin(*seq.pending_hit);
      seq.pending_hit.reset();
    }
    in.slots.Give(seq.slot);
    seq.slot = -1;
    --running_;
    running_on_.erase(seq.id);
    cancelled_.erase(seq.id);
  }

  enum class StepResult { kOk, kDeviceGone, kTimedOut };

  // Step 2's graphs: one prefill per admitted sequence (in.admitted), its first token sampled and delivered.
  // kDeviceGone: the rest of in.admitted joins in.running, to be failed with it; kTimedOut: the watchdog took them.
  StepResult RunPrefills(Instance& in) {
    for (size_t i = 0; i < in.admitted.size(); ++i) {
      Sequence& seq = *in.admitted[i];
      PrefillInput input{PrefillBucketFor(gen_, seq.prompt_length()), seq.slot, seq.request.prompt,
                         seq.request.encoder_output};
      const absl::Time start = clock_.Now();
      seq.queue_time = start - seq.enqueued;
      bool timed_out = false;
      absl::StatusOr<Logits> logits =
          CallBackend(in, absl::StrCat("prefill (length ", input.bucket_length, ")"), 1,
                      [&] { return in.backend->Prefill(input); }, timed_out);
      if (timed_out) return StepResult::kTimedOut;
      const absl::Time end = clock_.Now();
      Report({in.index, true, 1, 1, input.bucket_length, seq.prompt_length(), end - start, logits.ok()});
      std::vector<Outcome> ended;
      if (!logits.ok()) {
        const bool gone = IsDeviceGone(logits.status());
        ended.push_back({std::move(in.admitted[i]), FinishReason::kError, logits.status()});
        Finish(&in, ended);
        if (gone) {
          for (size_t j = i + 1; j < in.admitted.size(); ++j) in.running.push_back(std::move(in.admitted[j]));
          in.admitted.clear();
          return StepResult::kDeviceGone;
        }
        continue;
      }
      if (std::optional<FinishReason> reason = Deliver(in, seq, PickToken(in, seq, *logits, 0, DrawUniform(seq)), end)) {
        ended.push_back({std::move(in.admitted[i]), *reason, absl::OkStatus()});
        Finish(&in, ended);
      } else {
        in.running.push_back(std::move(in.admitted[i]));
      }
    }
    in.admitted.clear();
    return StepResult::kOk;
  }

  // Chunked prefill's iteration: the decode step of the sequences running when it starts and prefill chunks within
  // iteration_token_budget (one token per decode row, a chunk's real tokens), the decode step first or last
  // (decode_first). A sequence whose prompt is complete delivers its first token and joins in.running: with
  // decode_first false it joins this iteration's decode step, else the next one's.
  StepResult RunChunkedIteration(Instance& in) {
    if (StepResult step = RunPendingCopies(in); step != StepResult::kOk) return step;
    const auto decode_rows = static_cast<int64_t>(in.running.size());
    if (gen_.decode_first && !in.running.empty()) {
      if (StepResult step = RunDecodeStep(in); step != StepResult::kOk) return step;
    }
    if (StepResult step = RunChunks(in, gen_.iteration_token_budget - decode_rows); step != StepResult::kOk) {
      return step;
    }
    if (!gen_.decode_first && !in.running.empty()) return RunDecodeStep(in);
    return StepResult::kOk;
  }

  // Prefix caching: the hit blocks of newly admitted prompts that live in other slots are copied into theirs (one
  // CopyKv per run of consecutive blocks from one slot), then unpinned. A failed copy fails its sequence only.
  StepResult RunPendingCopies(Instance& in) {
    const int block = gen_.prefix_cache_block_size;
    for (size_t i = 0; i < in.prefilling.size();) {
      Sequence& seq = *in.prefilling[i];
      if (!seq.pending_hit) {
        ++i;
        continue;
      }
      const std::vector<CachedBlock>& blocks = seq.pending_hit->blocks;
      absl::Status copied = absl::OkStatus();
      for (size_t b = 0; b < blocks.size() && copied.ok();) {
        size_t e = b + 1;
        while (e < blocks.size() && blocks[e].slot == blocks[b].slot) ++e;
        if (blocks[b].slot != seq.slot) {
          const KvCopyInput input{blocks[b].slot, seq.slot, int64_t{blocks[b].index} * block,
                                  static_cast<int64_t>(e - b) * block};
          bool timed_out = false;
          copied = CallBackendStatus(
              in, absl::StrCat("KV copy (slot ", input.from_slot, " to ", input.to_slot, ")"),
              [&] { return in.backend->CopyKv(input); }, timed_out);
          if (timed_out) return StepResult::kTimedOut;
        }
        b = e;
      }
      {
        MutexLock lock(&mu_);
        in.prefix->Unpin(*seq.pending_hit);
        seq.pending_hit.reset();
      }
      if (copied.ok()) {
        ++i;
        continue;
      }
      const bool gone = IsDeviceGone(copied);
      std::vector<Outcome> ended;
      ended.push_back({std::move(in.prefilling[i]), FinishReason::kError, copied});
      in.prefilling.erase(in.prefilling.begin() + static_cast<std::ptrdiff_t>(i));
      Finish(&in, ended);
      if (gone) return StepResult::kDeviceGone;
    }
    return StepResult::kOk;
  }

  // Prefill chunks, oldest prompt first, while `budget` tokens last; the first chunk runs whatever the budget is
  // (NextChunkTokens' must_run), so a prompt always progresses. Each chunk writes the positions after what the
  // slot already holds (seq.prefilled). A failed chunk fails its sequence only (kDeviceGone: the rest stay, to be
  // failed with the instance; kTimedOut: the watchdog took them).
  StepResult RunChunks(Instance& in, int64_t budget) {
    bool ran = false;
    size_t i = 0;
    while (i < in.prefilling.size()) {
      Sequence& seq = *in.prefilling[i];
      const int64_t n = NextChunkTokens(gen_, seq.prompt_length() - seq.prefilled, budget, !ran);
      if (n == 0) break;
      PrefillChunkInput input;
      input.chunk_length = ChunkBucketFor(gen_, n);
      input.kv_length = KvLengthFor(gen_, seq.prefilled + n - 1);
      input.slot = seq.slot;
      input.start = seq.prefilled;
      input.tokens.assign(seq.request.prompt.begin() + seq.prefilled, seq.request.prompt.begin() + seq.prefilled + n);
      const absl::Time start = clock_.Now();
      if (seq.prefilled == seq.cached_tokens) seq.queue_time = start - seq.enqueued;
      bool timed_out = false;
      absl::StatusOr<Logits> logits = CallBackend(
          in, absl::StrCat("prefill chunk (chunk ", input.chunk_length, ", KV length ", input.kv_length, ")"), 1,
          [&] { return in.backend->PrefillChunk(input); }, timed_out);
      if (timed_out) return StepResult::kTimedOut;
      const absl::Time end = clock_.Now();
      Report({in.index, true, 1, 1, input.chunk_length, n, end - start, logits.ok(), false, true});
      ran = true;
      budget -= n;
      std::vector<Outcome> ended;
      if (!logits.ok()) {
        const bool gone = IsDeviceGone(logits.status());
        ended.push_back({std::move(in.prefilling[i]), FinishReason::kError, logits.status()});
        in.prefilling.erase(in.prefilling.begin() + static_cast<std::ptrdiff_t>(i));
        Finish(&in, ended);
        if (gone) return StepResult::kDeviceGone;
        continue;
      }
      seq.prefilled += n;
      RegisterPrefixBlocks(in, seq);
      if (seq.prefilled < seq.prompt_length()) continue;  // the same prompt's next chunk, if the budget allows
      SequencePtr done = std::move(in.prefilling[i]);
      in.prefilling.erase(in.prefilling.begin() + static_cast<std::ptrdiff_t>(i));
      if (std::optional<FinishReason> reason = Deliver(in, *done, PickToken(in, *done, *logits, 0, DrawUniform(*done)), end)) {
        ended.push_back({std::move(done), *reason, absl::OkStatus()});
        Finish(&in, ended);
      } else {
        in.running.push_back(std::move(done));
      }
    }
    return StepResult::kOk;
  }

  // Step 3: one decode step over every running sequence, in chunks of the largest batch bucket. A failed call
  // fails its own rows only. kDeviceGone: unprocessed rows stay in in.running; kTimedOut: the watchdog answered
  // every row (a row that finished in an earlier chunk of this step included: it is answered UNAVAILABLE).
  StepResult RunDecodeStep(Instance& in) {
    const size_t rows_total = in.running.size();
    std::vector<std::optional<Outcome>> verdicts(rows_total);
    bool gone = false;
    for (size_t begin = 0; begin < rows_total && !gone; begin += gen_.max_decode_batch()) {
      const size_t end = std::min(rows_total, begin + static_cast<size_t>(gen_.max_decode_batch()));
      DecodeInput input;
      bool device_may_pick = true;  // until a row needs its logits on the host
      std::vector<double> uniforms;
      int64_t max_position = 0;
      for (size_t r = begin; r < end; ++r) {
        Sequence& seq = *in.running[r];
        input.rows.push_back({seq.last_token, seq.next_position(), seq.slot});
        max_position = std::max(max_position, seq.next_position());
        const SamplingParams& sampling = seq.request.sampling;
        uniforms.push_back(DrawUniform(seq));
        input.picks.push_back({sampling.temperature, sampling.top_k, sampling.top_p, uniforms.back()});
        device_may_pick = device_may_pick && !MasksIds(seq);
      }
      if (!device_may_pick) input.picks.clear();
      const int rows = static_cast<int>(end - begin);
      input.batch_size = DecodeBatchFor(gen_, rows);
      input.kv_length = KvLengthFor(gen_, max_position);
      const absl::Time start = clock_.Now();
      bool timed_out = false;
      absl::StatusOr<Logits> logits =
          CallBackend(in, absl::StrCat("decode (batch ", input.batch_size, ", KV length ", input.kv_length, ")"), rows,
                      [&] { return in.backend->Decode(input); }, timed_out, /*may_pick=*/!input.picks.empty());
      if (timed_out) return StepResult::kTimedOut;
      const absl::Time produced = clock_.Now();
      Report({in.index, false, input.batch_size, rows, input.kv_length, rows, produced - start, logits.ok()});
      gone = !logits.ok() && IsDeviceGone(logits.status());
      for (size_t r = begin; r < end; ++r) {
        Sequence& seq = *in.running[r];
        if (!logits.ok()) {
          verdicts[r] = Outcome{nullptr, FinishReason::kError, logits.status()};
        } else if (std::optional<FinishReason> reason =
                       Deliver(in, seq, PickToken(in, seq, *logits, static_cast<int>(r - begin), uniforms[r - begin]),
                               produced)) {
          verdicts[r] = Outcome{nullptr, *reason, absl::OkStatus()};
        }
      }
    }
    std::vector<Outcome> ended;
    auto keep = in.running.begin();
    for (size_t r = 0; r < rows_total; ++r) {
      if (verdicts[r]) {
        verdicts[r]->sequence = std::move(in.running[r]);
        ended.push_back(std::move(*verdicts[r]));
      } else {
        *keep++ = std::move(in.running[r]);
      }
    }
    in.running.erase(keep, in.running.end());
    Finish(&in, ended);
    return gone ? StepResult::kDeviceGone : StepResult::kOk;
  }

  // `row`, or (a request with suppressed or allowed ids) a copy in in.masked with the excluded ids at -infinity.
  const float* Suppressed(Instance& in, const Sequence& seq, const float* row) {
    if (!MasksIds(seq)) return row;
    const GenerationRequest& r = seq.request;
    const bool first = seq.generated == 0;
    constexpr float kExcluded = -std::numeric_limits<float>::infinity();
    if (r.allowed_token_ids.empty()) {
      in.masked.assign(row, row + gen_.vocab_size);
    } else {
      in.masked.assign(gen_.vocab_size, kExcluded);
      for (int32_t id : r.allowed_token_ids) in.masked[id] = row[id];
    }
    for (int32_t id : r.suppressed_token_ids) in.masked[id] = kExcluded;
    if (first) {
      for (int32_t id : r.first_step_suppressed_ids) in.masked[id] = kExcluded;
    }
    return in.masked.data();
  }

  // Row r's next token: the backend's when it picked on its device (DecodeInput::picks), else sampled here with
  // the uniform drawn for it.
  int32_t PickToken(Instance& in, Sequence& seq, const Logits& logits, int r, double uniform) {
    if (!logits.picked.empty()) return logits.picked[r];
    const float* row = Suppressed(in, seq, logits.row(r));
    const SamplingParams& s = seq.request.sampling;
    return in.sampler.Sample(absl::MakeConstSpan(row, gen_.vocab_size), TokenPick{s.temperature, s.top_k, s.top_p, uniform});
  }

  // The uniform of the sequence's next draw (one generator output per sampled token; none when greedy), taken
  // before the step so that the host and a device that samples draw the same token.
  static double DrawUniform(Sequence& seq) {
    return seq.request.sampling.temperature > 0.0f ? Sampler::Uniform(seq.rng) : 0.0;
  }

  // Whether the sequence's next token comes from a masked row (suppressed or allowed ids, or first-step ids at its
  // first token): what Suppressed() copies and masks.
  static bool MasksIds(const Sequence& seq) {
    const GenerationRequest& r = seq.request;
    return !r.suppressed_token_ids.empty() || !r.allowed_token_ids.empty() ||
           (seq.generated == 0 && !r.first_step_suppressed_ids.empty());
  }


  // Queues the sequence's next token for the client (in.outbox) and says whether the sequence is done.
  std::optional<FinishReason> Deliver(Instance& in, Sequence& seq, int32_t token, absl::Time produced) {
    const int index = seq.generated++;
    seq.last_token = token;
    if (seq.client->on_token) {
      in.outbox.emplace_back(seq.client, GeneratedToken{token, index, produced, seq.cached_tokens});
    }
    const std::vector<int32_t>& stop = seq.request.stop_token_ids;
    if (gen_.IsEos(token) && !seq.request.ignore_eos) return FinishReason::kStop;
    if (std::find(stop.begin(), stop.end(), token) != stop.end()) return FinishReason::kStop;
    if (seq.client->stopped.load(std::memory_order_acquire)) return FinishReason::kStop;  // said at an earlier token
    if (seq.generated >= seq.request.max_tokens) return FinishReason::kLength;
    if (seq.next_position() >= gen_.kv_lengths.back()) return FinishReason::kLength;  // the context is full
    return std::nullopt;
  }

  // The backend call, with whatever goes wrong kept to this step: an exception or logits of the wrong shape
  // become Internal, and every error names the model, the graph and the instance (the backend's message follows).
  // The call is watched (executing under mu_); `timed_out` set: the watchdog answered this instance's sequences
  // while it ran, and the caller must not touch them (the result is dropped).
  template <typename Call>
  absl::StatusOr<Logits> CallBackend(Instance& in, const std::string& graph, int rows, Call call, bool& timed_out,
                                     bool may_pick = false) {
    FlushOutbox(in);  // the tokens sampled so far reach their clients while this call runs
    {
      MutexLock lock(&mu_);
      in.executing = true;
      in.executing_since = clock_.Now();
      in.graph = graph;
      watchdog_cv_.SignalAll();  // a new deadline
    }
    absl::StatusOr<Logits> result = absl::InternalError("not run");
    try {
      result = call();
    } catch (const std::exception& e) {
      result = absl::InternalError(absl::StrCat("the backend threw: ", e.what()));
    } catch (...) {
      result = absl::InternalError("the backend threw a non-standard exception");
    }
    {
      MutexLock lock(&mu_);
      in.executing = false;
      timed_out = in.timed_out;
    }
    if (timed_out) return absl::UnavailableError("timed out");
    if (result.ok() && !HasShape(*result, rows, may_pick)) {
      result = absl::InternalError(absl::StrCat("the backend returned ", result->rows, " x ", result->vocab,
                                                " logits (", result->values.size(), " values, ", result->picked.size(),
                                                " picked ids), expected ", rows, " x ", gen_.vocab_size));
    }
    if (result.ok()) return result;
    return absl::Status(result.status().code(),
                        absl::StrCat("model ", model_.name, ", ", graph, ", instance ", in.index, " (",
                                     descriptions_[in.index], "): ", result.status().message()));
  }

  // rows x vocab values, or (a backend that picked on its device, when asked to) no values and one id in
  // [0, vocab) per row.
  bool HasShape(const Logits& logits, int rows, bool may_pick) const {
    if (logits.rows != rows || logits.vocab != gen_.vocab_size) return false;
    if (logits.picked.empty()) return logits.values.size() == static_cast<size_t>(rows) * gen_.vocab_size;
    return may_pick && logits.values.empty() && logits.picked.size() == static_cast<size_t>(rows) &&
           std::all_of(logits.picked.begin(), logits.picked.end(),
                       [&](int32_t id) { return id >= 0 && id < gen_.vocab_size; });
  }

  // CallBackend for a call that returns no logits (CopyKv).
  template <typename Call>
  absl::Status CallBackendStatus(Instance& in, const std::string& graph, Call call, bool& timed_out) {
    auto as_logits = [&]() -> absl::StatusOr<Logits> {
      if (absl::Status status = call(); !status.ok()) return status;
      return Logits{0, gen_.vocab_size, {}, {}};
    };
    return CallBackend(in, graph, 0, as_logits, timed_out).status();
  }

  // The device is gone: fail what this instance holds, and with no instance left, everything waiting.
  void TakeOutOfRotation(Instance& in) {
    const absl::Status gone = absl::UnavailableError(
        absl::StrCat("model ", model_.name, ", instance ", in.index, " (", descriptions_[in.index],
                     ") is out of service: its device failed"));
    std::vector<Outcome> ended;
    for (std::vector<SequencePtr>* list : {&in.running, &in.prefilling}) {
      for (SequencePtr& seq : *list) ended.push_back({std::move(seq), FinishReason::kError, gone});
      list->clear();
    }
    std::vector<Outcome> stranded;
    {
      MutexLock lock(&mu_);
      stranded = LeaveRotationLocked();
    }
    Finish(&in, ended);
    Finish(nullptr, stranded);
  }

  // Hands the tokens sampled since the last call to the instance's lane, which runs their on_token in order
  // (skipping a client that already said stop). The engine waits only while more than one earlier hand-over is
  // still queued: delivery lags the engine by a step or two, never more.
  void FlushOutbox(Instance& in) {
    if (in.outbox.empty()) return;
    std::vector<std::pair<ClientPtr, GeneratedToken>> tokens;
    tokens.swap(in.outbox);
    in.lane.Post(
        [tokens = std::move(tokens)] {
          for (const auto& [client, token] : tokens) {
            if (client->stopped.load(std::memory_order_relaxed)) continue;
            ++client->delivered;
            if (!client->on_token(token)) client->stopped.store(true, std::memory_order_release);
          }
        },
        /*max_queued=*/1);
  }

  // Frees the slots still held, then answers each sequence and counts it out of in_flight_: on in's lane, after
  // every token already handed to it (in null: no sequence holds a slot; answered here, on this thread). A client
  // whose on_token said stop is answered OK/kStop whatever ended the sequence after that; output_tokens counts
  // the on_token calls made.
  void Finish(Instance* in, std::vector<Outcome>& ended) {
    if (ended.empty()) return;
    {
      MutexLock lock(&mu_);
      for (Outcome& o : ended) {
        if (o.sequence->slot >= 0) ReleaseSlotLocked(*in, *o.sequence);
      }
    }
    const absl::Time now = clock_.Now();
    std::vector<std::pair<ClientPtr, GenerationResult>> answers;
    for (Outcome& o : ended) {
      Sequence& seq = *o.sequence;
      GenerationResult result;
      result.status = Unshared(o.status);
      result.finish = o.reason;
      result.prompt_tokens = static_cast<int>(seq.prompt_length());
      result.queue_time = seq.admitted ? seq.queue_time : now - seq.enqueued;
      answers.emplace_back(std::move(seq.client), std::move(result));
    }
    auto answer = [this, answers = std::move(answers)]() mutable {
      for (auto& [client, result] : answers) {
        result.output_tokens = client->delivered;
        if (client->stopped.load(std::memory_order_relaxed)) {
          result.status = absl::OkStatus();
          result.finish = FinishReason::kStop;
        }
        client->on_done(std::move(result));
      }
      MutexLock lock(&mu_);
      in_flight_ -= static_cast<int64_t>(answers.size());
      idle_cv_.SignalAll();
    };
    if (in == nullptr) {
      answer();
      return;
    }
    FlushOutbox(*in);
    in->lane.Post(std::move(answer));
  }

  void Report(const GenerationStepReport& report) {
    if (observer_) observer_(report);
  }

  absl::Status NoInstanceLeft() const {
    return absl::UnavailableError(
        absl::StrCat("model ", model_.name, " has no instance left in rotation (every instance's device failed)"));
  }

  const ModelConfig& model_;
  const GenerationOptions& gen_;
  const Clock& clock_;
  const GenerationStepObserver observer_;
  const int max_running_;  // per instance
  const absl::Duration execution_timeout_;  // InfiniteDuration: no watchdog
  std::vector<std::string> descriptions_;   // each instance's Describe(), taken once: never asked of a hung one

  mutable Mutex mu_;
  CondVar work_cv_;  // new, cancelled, stopping, an instance out
  CondVar idle_cv_;  // in_flight_ decreased
  CondVar watchdog_cv_;  // a call started, shutting down
  std::deque<SequencePtr> waiting_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<SequenceId, int> running_on_ ABSL_GUARDED_BY(mu_);  // admitted sequence -> instance
  absl::flat_hash_set<SequenceId> cancelled_ ABSL_GUARDED_BY(mu_);        // admitted ones Cancel() asked to end
  std::mt19937_64 engine_rng_ ABSL_GUARDED_BY(mu_);
  SequenceId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  int in_rotation_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // accepted, not yet answered
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  std::once_flag stop_once_;

  std::vector<std::unique_ptr<Instance>> instances_;  // fixed after construction
  std::thread watchdog_;                              // when execution_timeout is finite
};

absl::StatusOr<std::unique_ptr<ContinuousBatcher>> ContinuousBatcher::Create(const ContinuousBatcherOptions& options) {
  if (options.model == nullptr) return absl::InvalidArgumentError("ContinuousBatcherOptions.model is null");
  const ModelConfig& model = *options.model;
  if (!model.generation) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model.name, " has no generation: section"));
  }
  if (options.instances.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model.name, " has no instances"));
  }
  for (GenerationBackend* backend : options.instances) {
    if (backend == nullptr) return absl::InvalidArgumentError(absl::StrCat("model ", model.name, ": a null instance"));
  }
  if (options.clock == nullptr) return absl::InvalidArgumentError("ContinuousBatcherOptions.clock is null");
  const GenerationOptions& gen = *model.generation;
  if (gen.prefill_lengths.empty() || gen.decode_batch_sizes.empty() || gen.kv_lengths.empty() ||
      gen.vocab_size < 1 || MaxRunningPerInstance(gen) < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", model.name, ": generation needs prefill_lengths, decode_batch_sizes, kv_lengths, vocab_size >= 1 ",
        "and max_num_seqs, kv_cache.slots >= 1"));
  }
  return std::unique_ptr<ContinuousBatcher>(new ContinuousBatcher(std::make_unique<Impl>(options)));
}

ContinuousBatcher::ContinuousBatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ContinuousBatcher::~ContinuousBatcher() { Stop(); }

absl::StatusOr<SequenceId> ContinuousBatcher::Enqueue(GenerationRequest request) {
  return impl_->Enqueue(std::move(request));
}
void ContinuousBatcher::Cancel(SequenceId id) { impl_->Cancel(id); }
void ContinuousBatcher::Stop() { impl_->Stop(); }
int ContinuousBatcher::Waiting() const { return impl_->Waiting(); }
int ContinuousBatcher::Running() const { return impl_->Running(); }
int ContinuousBatcher::SlotsInUse() const { return impl_->Running(); }
int ContinuousBatcher::TotalSlots() const { return impl_->TotalSlots(); }
int ContinuousBatcher::InstancesInRotation() const { return impl_->InstancesInRotation(); }
PrefixCacheCounters ContinuousBatcher::PrefixCache() const { return impl_->PrefixCache(); }
const ModelConfig& ContinuousBatcher::model() const { return impl_->model(); }

}  // namespace sluice
