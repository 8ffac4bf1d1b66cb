#include "backend/sim_generation_backend.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/generation_inputs.h"
#include "backend/sampler.h"
#include "backend/sim_faults.h"

namespace sluice {
namespace {

constexpr float kTopLogit = 10.0f;
constexpr float kSecondLogit = 9.0f;

class SimGenerationBackend final : public GenerationBackend {
 public:
  SimGenerationBackend(const InstanceOptions& options, SimSleeper sleeper, bool real_time)
      : model_(*options.model),
        generation_(*options.model->generation),
        replica_(options.replica),
        sleeper_(std::move(sleeper)),
        real_time_(real_time),
        faults_(options.model->sim->faults, options.replica),
        slots_(generation_.kv_cache.slots) {
    for (int64_t length : generation_.prefill_lengths) stats_.push_back({1, length, 0.0, 0.0, 0.0});
    for (int64_t chunk : generation_.prefill_chunk_lengths) stats_.push_back({1, chunk, 0.0, 0.0, 0.0});
    for (int batch_size : generation_.decode_batch_sizes) {
      for (int64_t kv_length : generation_.kv_lengths) stats_.push_back({batch_size, kv_length, 0.0, 0.0, 0.0});
    }
  }

  absl::StatusOr<Logits> Prefill(const PrefillInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidatePrefillInput(model_, input));
    SLUICE_RETURN_IF_ERROR(faults_.Next());
    sleeper_(SimPrefillLatency(*model_.sim, input.bucket_length));
    std::vector<int32_t>& slot = slots_[input.slot];
    if (slot.size() < input.tokens.size()) slot.resize(input.tokens.size(), 0);
    std::copy(input.tokens.begin(), input.tokens.end(), slot.begin());
    Logits logits = EmptyLogits(1);
    FillRow(logits.values.data(), std::span<const int32_t>(slot.data(), input.tokens.size()));
    return logits;
  }

  absl::StatusOr<Logits> PrefillChunk(const PrefillChunkInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidatePrefillChunkInput(model_, input));
    if (!generation_.chunked_prefill()) return absl::UnimplementedError("no prefill_chunk_lengths configured");
    SLUICE_RETURN_IF_ERROR(faults_.Next());
    sleeper_(SimPrefillChunkLatency(*model_.sim, input.chunk_length, input.kv_length));
    std::vector<int32_t>& slot = slots_[input.slot];
    const auto end = static_cast<size_t>(input.start) + input.tokens.size();
    if (slot.size() < end) slot.resize(end, 0);
    std::copy(input.tokens.begin(), input.tokens.end(), slot.begin() + input.start);
    Logits logits = EmptyLogits(1);
    FillRow(logits.values.data(), std::span<const int32_t>(slot.data(), end));
    return logits;
  }

  absl::Status CopyKv(const KvCopyInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidateKvCopyInput(model_, input));
    SLUICE_RETURN_IF_ERROR(faults_.Next());
    sleeper_(SimKvCopyLatency(*model_.sim, input.length));
    std::vector<int32_t>& from = slots_[input.from_slot];
    std::vector<int32_t>& to = slots_[input.to_slot];
    const auto end = static_cast<size_t>(input.start + input.length);
    if (from.size() < end) from.resize(end, 0);
    if (to.size() < end) to.resize(end, 0);
    std::copy(from.begin() + input.start, from.begin() + static_cast<std::ptrdiff_t>(end), to.begin() + input.start);
    return absl::OkStatus();
  }

  absl::StatusOr<Logits> Decode(const DecodeInput& input) override {
    SLUICE_RETURN_IF_ERROR(ValidateDecodeInput(model_, input));
    SLUICE_RETURN_IF_ERROR(faults_.Next());
    const absl::Duration latency = SimDecodeLatency(*model_.sim, input.batch_size, input.kv_length);
    if (model_.sim->picks_tokens && !input.picks.empty()) return DecodeAndPick(input, latency);
    sleeper_(latency);
    Logits logits = EmptyLogits(static_cast<int>(input.rows.size()));
    for (size_t r = 0; r < input.rows.size(); ++r) {
      FillRow(logits.values.data() + r * static_cast<size_t>(logits.vocab), WriteRow(input.rows[r]));
    }
    return logits;
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return stats_; }

  std::string Describe() const override {
    return absl::StrCat(model_.name, "#", replica_, " on sim (", KvCacheSummary(generation_), " simulated)");
  }

 private:
  // sim: {picks_tokens: true}: each row's token is picked here, by the engine's TokenPick, during the modeled step
  // (a graph that samples: the picks cost the device nothing extra). With the real sleeper the step lasts its
  // modeled time, the picks' host time included; an injected sleeper (a test's fake clock) is given the whole of it.
  Logits DecodeAndPick(const DecodeInput& input, absl::Duration latency) {
    const absl::Time start = absl::Now();
    const int vocab = generation_.vocab_size;
    Logits logits{static_cast<int>(input.rows.size()), vocab, {}, {}};
    row_logits_.assign(static_cast<size_t>(vocab), 0.0f);
    for (size_t r = 0; r < input.rows.size(); ++r) {
      const int32_t next = FillRow(row_logits_.data(), WriteRow(input.rows[r]));
      logits.picked.push_back(sampler_.Sample(row_logits_, input.picks[r]));
      row_logits_[static_cast<size_t>((next + 1) % vocab)] = 0.0f;  // zero again for the next row
      row_logits_[static_cast<size_t>(next)] = 0.0f;
    }
    sleeper_(real_time_ ? std::max(absl::ZeroDuration(), latency - (absl::Now() - start)) : latency);
    return logits;
  }

  // Writes a decode row's token at its position of its slot; the slot's ids up to that position.
  std::span<const int32_t> WriteRow(const DecodeRow& row) {
    std::vector<int32_t>& slot = slots_[row.slot];
    const auto end = static_cast<size_t>(row.position) + 1;
    if (slot.size() < end) slot.resize(end, 0);
    slot[row.position] = row.token;
    return std::span<const int32_t>(slot.data(), end);
  }

  Logits EmptyLogits(int rows) const {
    const int vocab = generation_.vocab_size;
    return Logits{rows, vocab, std::vector<float>(static_cast<size_t>(rows) * vocab, 0.0f), {}};
  }

  // The contract's two non-zero logits for a slot holding `ids`, written into a zeroed row; returns next.
  int32_t FillRow(float* out, std::span<const int32_t> ids) const {
    const int vocab = generation_.vocab_size;
    const int32_t next = SimNextToken(ids, vocab);
    out[(next + 1) % vocab] = kSecondLogit;
    out[next] = kTopLogit;  // after the second: with vocab_size 1 both are the same id
    return next;
  }

  const ModelConfig& model_;
  const GenerationOptions& generation_;
  const int replica_;
  SimSleeper sleeper_;
  const bool real_time_;  // the sleeper is absl::SleepFor (not a test's)
  SimFaultInjector faults_;
  Sampler sampler_;                 // picks_tokens
  std::vector<float> row_logits_;   // picks_tokens: one row, zero but for the two ids being picked from
  std::vector<std::vector<int32_t>> slots_;  // ids by position, per real slot; grown on first write
  std::vector<BucketLoadStats> stats_;
};

}  // namespace

absl::Duration SimPrefillLatency(const SimCostModel& cost, int64_t bucket_length) {
  return absl::Milliseconds(cost.base_ms) + absl::Microseconds(cost.per_sample_us * static_cast<double>(bucket_length));
}

absl::Duration SimPrefillChunkLatency(const SimCostModel& cost, int64_t chunk_length, int64_t /*kv_length*/) {
  return SimPrefillLatency(cost, chunk_length);
}

absl::Duration SimKvCopyLatency(const SimCostModel& cost, int64_t length) {
  return absl::Microseconds(cost.per_sample_us * static_cast<double>(length) / 64.0);
}

absl::Duration SimDecodeLatency(const SimCostModel& cost, int batch_size, int64_t kv_length) {
  return absl::Milliseconds(cost.base_ms) +
         absl::Microseconds(cost.per_sample_us * static_cast<double>(batch_size) * static_cast<double>(kv_length) /
                            64.0);
}

int32_t SimNextToken(std::span<const int32_t> ids, int vocab_size) {
  const auto p = static_cast<int64_t>(ids.size()) - 1;
  int64_t sum = 0;
  for (int32_t id : ids) sum += id;
  const int64_t value = 31 * static_cast<int64_t>(ids.back()) + 7 * p + sum;
  return static_cast<int32_t>(((value % vocab_size) + vocab_size) % vocab_size);
}

absl::StatusOr<std::unique_ptr<GenerationBackend>> CreateSimGenerationBackend(const InstanceOptions& options,
                                                                              SimSleeper sleeper) {
  if (options.model == nullptr) return absl::InvalidArgumentError("InstanceOptions.model is null");
  if (!options.model->generation) {
    return absl::InvalidArgumentError(absl::StrCat("model ", options.model->name, " is not a generation model"));
  }
  if (!options.model->sim) {
    return absl::InvalidArgumentError(absl::StrCat("model ", options.model->name, ": device sim needs 'sim:'"));
  }
  const bool real_time = !sleeper;
  if (real_time) sleeper = [](absl::Duration d) { absl::SleepFor(d); };
  return std::make_unique<SimGenerationBackend>(options, std::move(sleeper), real_time);
}

}  // namespace sluice
