// What every GenerationBackend implementation shares and that needs no libtorch: the checks of Prefill/Decode
// inputs against the model's compiled shapes (so the torch and sim devices refuse exactly the same inputs, with
// the same messages), the graph file names, and the KV cache's size.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "backend/base/model_config.h"
#include "backend/generation_backend.h"

namespace sluice {

// InvalidArgument naming the model and what is wrong: bucket_length not a compiled prompt bucket, 0 or more
// than bucket_length tokens, slot outside [0, kv_cache.slots), a token outside [0, vocab_size).
// REQUIRES: model.generation is set.
absl::Status ValidatePrefillInput(const ModelConfig& model, const PrefillInput& input);

// InvalidArgument naming the model and what is wrong: batch_size or kv_length not compiled, 0 or more than
// batch_size rows, a slot outside [0, kv_cache.slots) or used by two rows, a position outside [0, kv_length),
// a token outside [0, vocab_size).
// REQUIRES: model.generation is set.
absl::Status ValidateDecodeInput(const ModelConfig& model, const DecodeInput& input);

// InvalidArgument naming the model and what is wrong: chunk_length or kv_length not compiled, 0 or more than
// chunk_length tokens, start < 0, start + tokens over kv_length, slot outside [0, kv_cache.slots), a token outside
// [0, vocab_size). REQUIRES: model.generation is set.
absl::Status ValidatePrefillChunkInput(const ModelConfig& model, const PrefillChunkInput& input);

// InvalidArgument naming the model and what is wrong: a slot outside [0, kv_cache.slots), the same slot twice,
// start < 0, length < 1, start + length over context_length. REQUIRES: model.generation is set.
absl::Status ValidateKvCopyInput(const ModelConfig& model, const KvCopyInput& input);

// <directory>/graphs/prefill_l<length>.pt, prefill_chunk_c<chunk>_k<kv_length>.pt and decode_b<batch>_k<kv_length>.pt
std::string PrefillGraphPath(const ModelConfig& model, int64_t length);
std::string PrefillChunkGraphPath(const ModelConfig& model, int64_t chunk_length, int64_t kv_length);
std::string DecodeGraphPath(const ModelConfig& model, int batch_size, int64_t kv_length);

// Bytes of the K and V tensors together, scratch slot included:
// 2 x 4 x layers x (slots + 1) x context_length x kv_heads x head_dim.
int64_t KvCacheBytes(const GenerationOptions& options);

// "KV cache 16 slots x 1024 positions, 35.7 MB" (MB = 10^6 bytes), for Describe().
std::string KvCacheSummary(const GenerationOptions& options);

}  // namespace sluice
