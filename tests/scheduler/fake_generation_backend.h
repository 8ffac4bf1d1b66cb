// Test helpers for the generation engine: a fake decoder whose logits are a deterministic function of the
// tokens a KV-cache slot holds, and a GenerationBackend that keeps such a "cache" per slot, checks every call
// against the compiled shapes and the slot's contents, records each call, can be held (to keep an instance busy
// inside a call) or told to fail, and takes a fixed cost per call: FakeClock time, or real time without one.
//
// Because the logits depend on everything the slot holds up to the fed position, any slot or position mix-up by
// the engine changes the tokens: a sequence's tokens equal FakeDecoder::Greedy() only if its bookkeeping is right.
// Thread-safety: FakeGenerationBackend is safe for concurrent use (one mutex); FakeDecoder is a plain value.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/generation_backend.h"
#include "scheduler/clock.h"
#include "backend/sampler.h"
#include "backend/base/sync.h"

namespace sluice::testing {

struct FakeDecoder {
  int vocab = 64;
  int eos = 2;                       // never the argmax, and never drawn, unless forced below
  int64_t eos_at_history_length = -1;  // >= 0: the logits after exactly this many cached tokens make EOS the max

  // Logits for the next position after `history` (the tokens at positions [0, history.size())), in [0, 4).
  std::vector<float> Logits(const std::vector<int32_t>& history) const {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : history) h = (h ^ static_cast<uint64_t>(t + 1)) * 1099511628211ull;
    std::vector<float> logits(vocab);
    for (int v = 0; v < vocab; ++v) {
      uint64_t x = h + 0x9e3779b97f4a7c15ull * static_cast<uint64_t>(v + 1);  // splitmix64
      x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
      x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
      x ^= x >> 31;
      logits[v] = static_cast<float>(static_cast<double>(x >> 11) * 0x1.0p-53 * 4.0);
    }
    if (eos >= 0) logits[eos] = static_cast<int64_t>(history.size()) == eos_at_history_length ? 100.0f : -1e4f;
    return logits;
  }

  // The single-sequence reference: greedy tokens after `prompt`, no stop conditions.
  std::vector<int32_t> Greedy(std::vector<int32_t> prompt, int max_tokens) const {
    std::vector<int32_t> out;
    for (int i = 0; i < max_tokens; ++i) {
      const std::vector<float> logits = Logits(prompt);
      const int32_t token = Sampler::Greedy(logits);
      out.push_back(token);
      prompt.push_back(token);
    }
    return out;
  }
};

struct BackendCall {
  bool prefill = false;
  int batch_size = 1;            // 1 for a prefill
  int64_t length = 0;            // prefill: the prompt bucket; decode: the KV length
  std::vector<DecodeRow> rows;   // decode rows; a prefill: one row {last prompt token, last position, slot}
  std::vector<int32_t> prompt;   // prefill only (a chunk: its tokens)
  absl::Time started;
  int64_t chunk_start = -1;      // a prefill chunk: its first position (length: the chunk bucket; kv_length below)
  int64_t chunk_kv_length = 0;
  std::vector<TokenPick> picks;  // a decode's DecodeInput::picks (empty: the engine needs the logits)
  bool answered_picked = false;  // the fake picked "on the device" (Logits::picked, no values)
};

class FakeGenerationBackend final : public GenerationBackend {
 public:
  using FailRule = std::function<std::optional<absl::Status>(const BackendCall&)>;

  FakeGenerationBackend(const GenerationOptions& gen, FakeDecoder decoder, FakeClock* clock,
                        absl::Duration prefill_cost = absl::Milliseconds(5),
                        absl::Duration decode_cost = absl::Milliseconds(5))
      : gen_(gen), decoder_(decoder), clock_(clock), prefill_cost_(prefill_cost), decode_cost_(decode_cost) {
    MutexLock lock(&mu_);
    cache_.resize(gen.kv_cache.slots);
  }

  absl::StatusOr<Logits> Prefill(const PrefillInput& input) override {
    absl::StatusOr<Logits> result;
    {
      MutexLock lock(&mu_);
      BackendCall call{true, 1, input.bucket_length, {}, input.tokens, Now()};
      if (!input.tokens.empty()) {
        call.rows.push_back({input.tokens.back(), static_cast<int64_t>(input.tokens.size()) - 1, input.slot});
      }
      if (!Contains(gen_.prefill_lengths, input.bucket_length)) Violation("prefill bucket ", input.bucket_length);
      if (input.tokens.empty() || static_cast<int64_t>(input.tokens.size()) > input.bucket_length) {
        Violation("prefill of ", input.tokens.size(), " tokens into bucket ", input.bucket_length);
      }
      if (auto smaller = SmallerBucket(gen_.prefill_lengths, input.bucket_length, input.tokens.size())) {
        Violation("prefill bucket ", input.bucket_length, " where ", *smaller, " fits");
      }
      if (absl::Status admitted = Run(call); !admitted.ok()) {
        result = admitted;
      } else if (!SlotOk(input.slot)) {
        result = Logits{1, decoder_.vocab, decoder_.Logits(input.tokens), {}};
      } else {
        cache_[input.slot] = input.tokens;
        result = Logits{1, decoder_.vocab, decoder_.Logits(cache_[input.slot]), {}};
      }
    }
    Spend(prefill_cost_);
    return result;
  }

  // Checks that the chunk continues exactly what the slot holds (positions [0, start)) and uses the smallest chunk
  // and KV buckets; the slot then holds its tokens up to start + n (a later position is dropped, as a prompt's
  // positions are rewritten before any decode reads them).
  absl::StatusOr<Logits> PrefillChunk(const PrefillChunkInput& input) override {
    absl::StatusOr<Logits> result;
    {
      MutexLock lock(&mu_);
      const auto n = static_cast<int64_t>(input.tokens.size());
      BackendCall call{true, 1, input.chunk_length, {}, input.tokens, Now(), input.start, input.kv_length};
      if (n > 0) call.rows.push_back({input.tokens.back(), input.start + n - 1, input.slot});
      if (!Contains(gen_.prefill_chunk_lengths, input.chunk_length)) Violation("chunk length ", input.chunk_length);
      if (n < 1 || n > input.chunk_length) Violation("chunk of ", n, " tokens into chunk ", input.chunk_length);
      if (auto smaller = SmallerBucket(gen_.prefill_chunk_lengths, input.chunk_length, n)) {
        Violation("chunk ", input.chunk_length, " where ", *smaller, " fits");
      }
      if (!Contains(gen_.kv_lengths, input.kv_length) || input.start + n > input.kv_length) {
        Violation("chunk at [", input.start, ", ", input.start + n, ") in KV length ", input.kv_length);
      }
      if (auto smaller = SmallerBucket(gen_.kv_lengths, input.kv_length, input.start + n)) {
        Violation("chunk KV length ", input.kv_length, " where ", *smaller, " fits");
      }
      if (absl::Status admitted = Run(call); !admitted.ok()) {
        result = admitted;
      } else if (!SlotOk(input.slot)) {
        result = Logits{1, decoder_.vocab, decoder_.Logits(input.tokens), {}};
      } else {
        std::vector<int32_t>& slot = cache_[input.slot];
        // A first chunk (start 0) may land in a slot a finished sequence left full; with prefix caching so may a
        // chunk after a prefix reused in place (the slot then holds more than the reused prefix).
        const bool fits = gen_.prefix_caching() ? static_cast<int64_t>(slot.size()) >= input.start
                                                : static_cast<int64_t>(slot.size()) == input.start;
        if (input.start != 0 && !fits) {
          Violation("slot ", input.slot, " holds ", slot.size(), " tokens, chunk starts at ", input.start);
        }
        slot.resize(input.start);
        slot.insert(slot.end(), input.tokens.begin(), input.tokens.end());
        result = Logits{1, decoder_.vocab, decoder_.Logits(slot), {}};
      }
    }
    Spend(prefill_cost_);
    return result;
  }

  // Copies what from_slot holds at [start, start + length) to the same positions of to_slot (which must hold at
  // least [0, start): copies run in position order), recorded in copies(), not in calls().
  absl::Status CopyKv(const KvCopyInput& input) override {
    MutexLock lock(&mu_);
    copies_.push_back(input);
    if (!SlotOk(input.from_slot) || !SlotOk(input.to_slot)) return absl::InvalidArgumentError("bad slot");
    std::vector<int32_t>& from = cache_[input.from_slot];
    std::vector<int32_t>& to = cache_[input.to_slot];
    if (static_cast<int64_t>(from.size()) < input.start + input.length) {
      Violation("copy of [", input.start, ", ", input.start + input.length, ") from slot ", input.from_slot,
                " holding ", from.size());
      return absl::InternalError("copy past what the slot holds");
    }
    if (static_cast<int64_t>(to.size()) < input.start) Violation("copy into slot ", input.to_slot, " with a gap");
    to.resize(input.start);
    to.insert(to.end(), from.begin() + input.start, from.begin() + input.start + input.length);
    return absl::OkStatus();
  }
  std::vector<KvCopyInput> copies() const {
    MutexLock lock(&mu_);
    return copies_;
  }

  absl::StatusOr<Logits> Decode(const DecodeInput& input) override {
    absl::StatusOr<Logits> result;
    {
      MutexLock lock(&mu_);
      BackendCall call{false, input.batch_size, input.kv_length, input.rows, {}, Now()};
      call.picks = input.picks;
      const bool sampled = std::any_of(input.picks.begin(), input.picks.end(),
                                       [](const TokenPick& p) { return p.temperature > 0.0f; });
      call.answered_picked = !input.picks.empty() && (picks_ == DevicePicks::kAll ||
                                                      (picks_ == DevicePicks::kArgmax && !sampled));
      const int rows = static_cast<int>(input.rows.size());
      if (!Contains(gen_.decode_batch_sizes, input.batch_size) || rows < 1 || rows > input.batch_size) {
        Violation("decode of ", rows, " rows at batch size ", input.batch_size);
      }
      if (auto smaller = SmallerBucket(gen_.decode_batch_sizes, input.batch_size, rows)) {
        Violation("decode batch ", input.batch_size, " where ", *smaller, " fits");
      }
      if (!Contains(gen_.kv_lengths, input.kv_length)) Violation("KV length ", input.kv_length);
      int64_t max_position = 0;
      std::vector<bool> seen(gen_.kv_cache.slots, false);
      for (const DecodeRow& row : input.rows) {
        max_position = std::max(max_position, row.position);
        if (!SlotOk(row.slot)) continue;
        if (seen[row.slot]) Violation("slot ", row.slot, " twice in one step");
        seen[row.slot] = true;
        if (row.position >= input.kv_length) Violation("position ", row.position, " >= KV length ", input.kv_length);
        if (row.position != static_cast<int64_t>(cache_[row.slot].size())) {
          Violation("slot ", row.slot, " holds ", cache_[row.slot].size(), " tokens, fed at position ", row.position);
        }
      }
      if (auto smaller = SmallerBucket(gen_.kv_lengths, input.kv_length, max_position + 1)) {
        Violation("KV length ", input.kv_length, " where ", *smaller, " fits");
      }
      if (absl::Status admitted = Run(call); !admitted.ok()) {
        result = admitted;
      } else {
        Logits logits{rows, decoder_.vocab, {}, {}};
        for (const DecodeRow& row : input.rows) {
          std::vector<int32_t> history;
          if (SlotOk(row.slot)) {
            std::vector<int32_t>& slot = cache_[row.slot];
            slot.resize(std::max<int64_t>(0, row.position));
            slot.push_back(row.token);
            history = slot;
          }
          const std::vector<float> row_logits = decoder_.Logits(history);
          if (call.answered_picked) {  // "on the device": no values come back
            const TokenPick& pick = input.picks[logits.picked.size()];
            logits.picked.push_back(device_sampler_.Sample(row_logits, pick));
          } else {
            logits.values.insert(logits.values.end(), row_logits.begin(), row_logits.end());
          }
        }
        result = std::move(logits);
      }
    }
    Spend(decode_cost_);
    return result;
  }

  // From now on a decode that comes with picks is answered with the picked ids and no logits, as a backend that
  // picks on its device: always (kAll, a GPU) or when every row is greedy (kArgmax, the TorchScript CPU backend).
  enum class DevicePicks { kNone, kArgmax, kAll };
  void PickOnDevice(DevicePicks picks) {
    MutexLock lock(&mu_);
    picks_ = picks;
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return load_stats_; }
  std::string Describe() const override { return "fake decoder"; }

  // The next calls wait inside the backend until Release().
  void Hold() {
    MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    MutexLock lock(&mu_);
    held_ = false;
    hold_from_call_ = 0;
    released_.SignalAll();
  }
  // Holds from the n-th call on (counting from 1), as Hold() called just before it.
  void HoldFromCall(size_t n) {
    MutexLock lock(&mu_);
    hold_from_call_ = n;
  }
  // Releases the calls held now and holds again from the n-th call on (one step, no window between the two).
  void ReleaseUntilCall(size_t n) {
    MutexLock lock(&mu_);
    held_ = false;
    hold_from_call_ = n;
    released_.SignalAll();
  }
  // Calls now waiting inside the backend.
  int blocked() const {
    MutexLock lock(&mu_);
    return blocked_;
  }
  // Each call is offered to `rule` (after any hold); a status it returns fails that call.
  void FailWhen(FailRule rule) {
    MutexLock lock(&mu_);
    fail_rule_ = std::move(rule);
  }
  // Every later call fails Unavailable, as a device that disappeared.
  void GoAway() {
    MutexLock lock(&mu_);
    gone_ = true;
  }
  std::vector<BackendCall> calls() const {
    MutexLock lock(&mu_);
    return calls_;
  }
  size_t call_count() const {
    MutexLock lock(&mu_);
    return calls_.size();
  }
  std::thread::id call_thread() const {  // the thread of the latest call (an engine thread)
    MutexLock lock(&mu_);
    return call_thread_;
  }
  std::vector<std::string> violations() const {
    MutexLock lock(&mu_);
    return violations_;
  }

 private:
  // Records the call, waits while held, then says whether it fails.
  absl::Status Run(const BackendCall& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    calls_.push_back(call);
    call_thread_ = std::this_thread::get_id();
    if (hold_from_call_ != 0 && calls_.size() >= hold_from_call_) held_ = true;
    ++blocked_;
    while (held_) released_.Wait(&mu_);
    --blocked_;
    if (gone_) return absl::UnavailableError("fake device gone");
    if (fail_rule_) {
      if (std::optional<absl::Status> failure = fail_rule_(call)) return *failure;
    }
    return absl::OkStatus();
  }

  absl::Time Now() const { return clock_ != nullptr ? clock_->Now() : absl::Now(); }
  // A call's cost: fake time when there is a FakeClock, else real time (sleeping).
  void Spend(absl::Duration cost) {
    if (clock_ != nullptr) {
      clock_->Advance(cost);
    } else {
      absl::SleepFor(cost);
    }
  }

  bool SlotOk(int slot) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (slot >= 0 && slot < gen_.kv_cache.slots) return true;
    Violation("slot ", slot, " outside [0, ", gen_.kv_cache.slots, ")");
    return false;
  }

  template <typename T>
  static bool Contains(const std::vector<T>& v, int64_t x) {
    return std::find(v.begin(), v.end(), static_cast<T>(x)) != v.end();
  }
  // A compiled size smaller than `chosen` that still holds `needed`, if any (the engine must pick the smallest).
  template <typename T>
  static std::optional<T> SmallerBucket(const std::vector<T>& sizes, T chosen, int64_t needed) {
    for (T s : sizes) {
      if (s < chosen && s >= needed) return s;
    }
    return std::nullopt;
  }

  template <typename... Args>
  void Violation(const Args&... args) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    violations_.push_back(absl::StrCat(args...));
  }

  const GenerationOptions gen_;
  const FakeDecoder decoder_;
  DevicePicks picks_ ABSL_GUARDED_BY(mu_) = DevicePicks::kNone;
  Sampler device_sampler_ ABSL_GUARDED_BY(mu_);
  FakeClock* const clock_;
  const absl::Duration prefill_cost_;
  const absl::Duration decode_cost_;
  const std::vector<BucketLoadStats> load_stats_;

  mutable Mutex mu_;
  CondVar released_;
  std::vector<KvCopyInput> copies_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<int32_t>> cache_ ABSL_GUARDED_BY(mu_);  // [slot] tokens at positions [0, size)
  std::vector<BackendCall> calls_ ABSL_GUARDED_BY(mu_);
  std::thread::id call_thread_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  FailRule fail_rule_ ABSL_GUARDED_BY(mu_);
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  int blocked_ ABSL_GUARDED_BY(mu_) = 0;
  size_t hold_from_call_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sluice::testing
