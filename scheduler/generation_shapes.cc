#include "scheduler/generation_shapes.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status CheckGenerationRequest(const GenerationOptions& options, const GenerationRequest& request) {
  if (!request.on_done) return absl::InvalidArgumentError("internal: generation request has no on_done callback");
  const int64_t prompt = static_cast<int64_t>(request.prompt.size());
  if (prompt == 0) return absl::InvalidArgumentError("the prompt is empty (it needs at least one token)");
  if (prompt > options.max_prompt_length()) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt has ", prompt, " tokens, more than the longest ",
                                                   "prompt the model takes (", options.max_prompt_length(), ")"));
  }
  if (request.max_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_tokens is ", request.max_tokens, "; it must be at least 1"));
  }
  if (prompt + request.max_tokens > options.context_length) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt (", prompt, " tokens) + max_tokens (",
                                                   request.max_tokens, ") = ", prompt + request.max_tokens,
                                                   " exceeds the context length ", options.context_length));
  }
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const int32_t id = request.prompt[i];
    if (id < 0 || id >= options.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", i, " is id ", id, ", outside the vocabulary [0, ",
                                                     options.vocab_size, ")"));
    }
  }
  for (const std::vector<int32_t>* ids :
       {&request.suppressed_token_ids, &request.first_step_suppressed_ids, &request.allowed_token_ids}) {
    for (int32_t id : *ids) {
      if (id < 0 || id >= options.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("suppressed or allowed token id ", id,
                                                       " is outside the vocabulary [0, ", options.vocab_size, ")"));
      }
    }
  }
  if (options.cross_attention) {
    const int64_t want = options.cross_attention->encoder_output_size();
    if (request.encoder_output == nullptr || static_cast<int64_t>(request.encoder_output->size()) != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "an encoder-decoder model's sequence needs its encoder output (", want, " values); it has ",
          request.encoder_output ? request.encoder_output->size() : 0));
    }
  } else if (request.encoder_output != nullptr) {
    return absl::InvalidArgumentError("an encoder output was given to a decoder-only model");
  }
  const SamplingParams& s = request.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature is ", s.temperature, "; it must be a finite number >= 0 (0: greedy)"));
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {  // also refuses NaN
    return absl::InvalidArgumentError(absl::StrCat("top_p is ", s.top_p, "; it must be in (0, 1]"));
  }
  if (s.top_k < 0) {
    return absl::InvalidArgumentError(absl::StrCat("top_k is ", s.top_k, "; it must be >= 0 (0: no limit)"));
  }
  return absl::OkStatus();
}

int64_t PrefillBucketFor(const GenerationOptions& options, int64_t prompt_length) {
  auto it = std::lower_bound(options.prefill_lengths.begin(), options.prefill_lengths.end(), prompt_length);
  return it == options.prefill_lengths.end() ? options.prefill_lengths.back() : *it;
}

int DecodeBatchFor(const GenerationOptions& options, int rows) {
  auto it = std::lower_bound(options.decode_batch_sizes.begin(), options.decode_batch_sizes.end(), rows);
  return it == options.decode_batch_sizes.end() ? options.decode_batch_sizes.back() : *it;
}

int64_t KvLengthFor(const GenerationOptions& options, int64_t max_position) {
  auto it = std::upper_bound(options.kv_lengths.begin(), options.kv_lengths.end(), max_position);
  return it == options.kv_lengths.end() ? options.kv_lengths.back() : *it;
}

int64_t NextChunkTokens(const GenerationOptions& options, int64_t remaining, int64_t budget, bool must_run) {
  int64_t fits = 0;  // the largest chunk length within the budget
  for (int64_t chunk : options.prefill_chunk_lengths) {
    if (chunk <= budget) fits = chunk;
  }
  if (fits > 0) return std::min(remaining, fits);
  if (remaining <= budget) return remaining;
  return must_run ? std::min(remaining, options.prefill_chunk_lengths.front()) : 0;
}

int64_t ChunkBucketFor(const GenerationOptions& options, int64_t tokens) {
  auto it = std::lower_bound(options.prefill_chunk_lengths.begin(), options.prefill_chunk_lengths.end(), tokens);
  return it == options.prefill_chunk_lengths.end() ? options.prefill_chunk_lengths.back() : *it;
}

int MaxRunningPerInstance(const GenerationOptions& options) {
  return std::min(options.max_num_seqs, options.kv_cache.slots);
}

}  // namespace sluice
