// How generation requests and engine steps map onto a decoder's compiled shapes (GenerationOptions): the
// engine's admission check on a GenerationRequest, and the smallest compiled bucket for a prefill or a decode
// step. Pure functions of the options.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "backend/base/generation_config.h"
#include "scheduler/generation_request.h"

namespace sluice {

// OK when `request` may be queued; otherwise InvalidArgument naming the value and the limit (empty prompt,
// prompt longer than the largest prefill bucket, max_tokens < 1, prompt + max_tokens over the context length,
// a token id outside [0, vocab_size), temperature negative or not finite, top_p outside (0, 1], top_k < 0, no
// on_done).
absl::Status CheckGenerationRequest(const GenerationOptions& options, const GenerationRequest& request);

// The smallest compiled prefill length >= prompt_length. REQUIRES: prompt_length <= max_prompt_length().
int64_t PrefillBucketFor(const GenerationOptions& options, int64_t prompt_length);
// The smallest compiled decode batch size >= rows. REQUIRES: 1 <= rows <= max_decode_batch().
int DecodeBatchFor(const GenerationOptions& options, int rows);
// The smallest compiled KV length > max_position (the step writes position max_position, so it needs
// max_position + 1 positions). REQUIRES: max_position < kv_lengths.back().
int64_t KvLengthFor(const GenerationOptions& options, int64_t max_position);

// Chunked prefill: the real tokens of a prompt's next chunk, with `remaining` prompt tokens still to write and
// `budget` tokens left in the engine iteration: the largest compiled chunk length <= budget, capped at remaining;
// else all of remaining when it fits the budget; else (no chunk fits) 0, unless `must_run` (the iteration's first
// chunk, so that prompts always progress): then the smallest chunk length, capped at remaining.
// REQUIRES: options.chunked_prefill(); remaining >= 1.
int64_t NextChunkTokens(const GenerationOptions& options, int64_t remaining, int64_t budget, bool must_run);
// The smallest compiled chunk length >= tokens. REQUIRES: 1 <= tokens <= prefill_chunk_lengths.back().
int64_t ChunkBucketFor(const GenerationOptions& options, int64_t tokens);

// Sequences one instance may run at once: max_num_seqs, bounded by its KV-cache slots.
int MaxRunningPerInstance(const GenerationOptions& options);

}  // namespace sluice
