// What a front end hands the generation engine (scheduler/continuous_batcher.h), and what comes back.
// Token ids only: tokenizing, chat templates, stop strings and detokenizing belong to server/llm/.
// Thread-safety: plain values. Both callbacks run on the delivery thread of the instance the sequence runs on
// (on_done of a sequence never admitted also on a Cancel() caller's or an engine thread, see ContinuousBatcher),
// one at a time per instance, never under an engine lock; they must be quick (serialize, hand to the transport):
// a slow one delays every sequence of its instance by a step or two.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace sluice {

using SequenceId = uint64_t;

// temperature 0 is greedy (argmax; ties go to the lowest id). Otherwise: logits / temperature, keep the top_k
// (0: all), keep the smallest set whose probability reaches top_p (1: all), draw with a generator seeded by
// `seed` (absent: one drawn from the engine's own generator). A sequence's draws depend only on its own
// logits and seed, never on what else shares the batch.
struct SamplingParams {
  float temperature = 0.0f;
  int top_k = 0;
  float top_p = 1.0f;
  std::optional<uint64_t> seed;
};

enum class FinishReason {
  kLength,     // max_tokens generated, or the context is full
  kStop,       // EOS, a stop token id, or on_token asked to stop (a stop string matched)
  kCancelled,  // Cancel(), client gone
  kDeadline,   // the deadline passed while waiting or generating
  kError,      // the backend failed (status says why)
};
const char* FinishReasonName(FinishReason reason);  // "length", "stop", "cancelled", "deadline", "error"

struct GeneratedToken {
  int32_t id = 0;
  int index = 0;         // 0 for the first generated token
  absl::Time produced;   // engine clock, when its logits were sampled
  int64_t cached_prompt_tokens = 0;  // prefix caching: prompt positions reused from the cache, not prefilled
};

struct GenerationResult {
  absl::Status status;   // OK for kLength/kStop; CANCELLED, DEADLINE_EXCEEDED, or the backend's error otherwise
  FinishReason finish = FinishReason::kStop;
  int prompt_tokens = 0;
  int output_tokens = 0;        // tokens delivered through on_token
  absl::Duration queue_time;    // accepted -> its prefill started
};

// Return false to finish the sequence with kStop (e.g. a stop string matched or the client is gone); the token
// itself counts as delivered, no later token is, and the engine frees the slot within an iteration or two.
using TokenCallback = std::function<bool(const GeneratedToken&)>;
using GenerationDoneCallback = std::function<void(GenerationResult)>;

struct GenerationRequest {
  std::vector<int32_t> prompt;       // token ids (BOS already added by the caller), 1..largest prefill bucket
  int max_tokens = 0;                // >= 1; prompt + max_tokens <= context_length
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;  // besides EOS
  // Never sampled (their logits count as -infinity): suppressed_token_ids at every step, first_step_suppressed_ids
  // besides them at the first generated token (Whisper's suppress_tokens and begin_suppress_tokens). A non-empty
  // allowed_token_ids restricts every step to those ids (Whisper's language detection). Ids in [0, vocab_size).
  std::vector<int32_t> suppressed_token_ids;
  std::vector<int32_t> first_step_suppressed_ids;
  std::vector<int32_t> allowed_token_ids;
  // An encoder-decoder model's (generation.cross_attention) encoder output for this sequence, FP32
  // [encoder_positions, encoder_hidden]: its admission writes the cross-attention K/V from it. Required there,
  // refused elsewhere. Shared: several sequences may decode one encoder output.
  std::shared_ptr<const std::vector<float>> encoder_output;
  bool ignore_eos = false;           // generate exactly max_tokens (benchmarks)
  absl::Time deadline = absl::InfiniteFuture();
  TokenCallback on_token;
  GenerationDoneCallback on_done;    // exactly once per accepted request
};

}  // namespace sluice
