// The `generation:` section of a text-generation model's config.yaml (`kind: generation`): the decoder's
// compiled shapes (prompt buckets, decode batch buckets, KV-length buckets, KV-cache slots), its tokenizer and
// special tokens, the engine's admission policy and a simple chat template. A generation model has no
// inputs/outputs/buckets keys: its graphs are the ones named below, not (batch, length) buckets.
//
//   kind: generation
//   generation:
//     tokenizer: tokenizer.model          # SentencePiece model, relative to the model directory
//     vocab_size: 2048                    # logits per position; token ids outside [0, vocab_size) are refused
//     context_length: 1024                # prompt + generated tokens of one sequence
//     kv_cache: {slots: 16, layers: 4, kv_heads: 2, head_dim: 32}   # compiled cache shape (see below)
//     prefill_lengths: [64, 128, 256, 512, 1024]   # graphs/prefill_l<L>.pt, batch 1
//     decode_batch_sizes: [1, 2, 4, 8, 16]         # graphs/decode_b<B>_k<K>.pt for every B and K
//     kv_lengths: [128, 256, 512, 1024]            # last == context_length
//     bos_token_id: 1                     # prepended to every prompt (-1: none)
//     eos_token_id: 2                     # ends a sequence unless the request ignores EOS; or a list: [128001, 128009]
//     max_num_seqs: 16                    # sequences decoding at once (<= kv_cache.slots)
//     prefill_token_budget: 1024          # prompt tokens admitted per engine iteration (>= largest prompt bucket)
//     prefill_chunk_lengths: [128]        # chunked prefill: graphs/prefill_chunk_c<C>_k<K>.pt for every C and K
//                                         # (absent: each prompt is prefilled whole, by its prefill_l<L> graph)
//     iteration_token_budget: 144         # chunked: decode rows + chunk tokens per iteration (default
//                                         # max_num_seqs + the largest chunk length)
//     decode_first: true                  # chunked: the decode step runs before the iteration's chunks
//     prefix_cache_block_size: 64         # chunked: prefix caching of full blocks of this many prompt tokens
//                                         # (absent or 0: off); divides context_length
//     max_queue_size: 256                 # waiting sequences; more are refused RESOURCE_EXHAUSTED / 429
//     default_max_tokens: 128             # when a request does not say
//     execution_timeout_ms: 60000         # a prefill/decode call running longer: its sequences are answered
//                                         # UNAVAILABLE and its instance leaves rotation (0: no watchdog)
//     chat_template: {system: "<<SYS>> ", user: "User: ", assistant: "Assistant: ", separator: "\n"}
//     cross_attention: {encoder_positions: 1500, encoder_hidden: 512}   # encoder-decoder (kind: speech) only
//
// The KV cache: two FP32 tensors (K and V) of shape [layers, slots + 1, context_length, kv_heads, head_dim],
// allocated once per instance on its device and passed to every graph, which updates them in place. Slot
// `slots` (the last one) is the scratch slot that padding rows of a decode batch write into.
//
// cross_attention (the decoder of an encoder-decoder model, a `kind: speech` model with `speech.recognizer:
// whisper`): each sequence's admission (prefill) gets its encoder output, FP32 [encoder_positions, encoder_hidden],
// and writes the cross-attention K/V into its slot of two more caches: cross_k [layers, slots + 1, kv_heads,
// head_dim, encoder_positions] and cross_v [layers, slots + 1, kv_heads, encoder_positions, head_dim], passed to
// every graph after k_cache and v_cache.
//
// Thread-safety: plain values.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/yaml_node.h"

namespace sluice {

struct KvCacheShape {
  int slots = 0;     // real sequence slots (the tensors hold one more: the scratch slot)
  int layers = 0;
  int kv_heads = 0;
  int head_dim = 0;
};

// How a chat conversation becomes one prompt: each message is <role prefix><content><separator>, then the
// assistant prefix that the model continues.
struct ChatTemplate {
  std::string system = "System: ";
  std::string user = "User: ";
  std::string assistant = "Assistant: ";
  std::string separator = "\n";
};

struct CrossAttentionShape {
  int64_t encoder_positions = 0;
  int64_t encoder_hidden = 0;
  int64_t encoder_output_size() const { return encoder_positions * encoder_hidden; }
};

struct GenerationOptions {
  std::string tokenizer_path;  // absolute after parsing (resolved against the model directory)
  int vocab_size = 0;
  int64_t context_length = 0;
  KvCacheShape kv_cache;
  std::vector<int64_t> prefill_lengths;  // ascending
  std::vector<int> decode_batch_sizes;   // ascending
  std::vector<int64_t> kv_lengths;       // ascending, last == context_length
  int bos_token_id = -1;
  int eos_token_id = -1;
  std::vector<int> extra_eos_token_ids;  // the rest of an eos_token_id list: each also ends a sequence
  int max_num_seqs = 0;
  int64_t prefill_token_budget = 0;
  // Chunked prefill (empty: off). Ascending; each at most kv_lengths.front(). With it on, a prompt is written into
  // its slot chunk by chunk, interleaved with decode steps, and prefill_token_budget does not apply.
  std::vector<int64_t> prefill_chunk_lengths;
  int64_t iteration_token_budget = 0;  // chunked: decode rows + chunk tokens per engine iteration
  bool decode_first = true;            // chunked: decode step before the iteration's chunks
  // Prefix caching (0: off; needs chunked prefill): KV of full prompt blocks of this many tokens is reused by later
  // prompts with the same leading tokens (scheduler/prefix_block_table.h).
  int prefix_cache_block_size = 0;
  int max_queue_size = 256;
  double execution_timeout_ms = 60000;  // 0: none
  int default_max_tokens = 128;
  ChatTemplate chat_template;
  std::optional<CrossAttentionShape> cross_attention;  // encoder-decoder models only

  int64_t max_prompt_length() const { return prefill_lengths.back(); }
  bool IsEos(int32_t token) const {
    return token == eos_token_id ||
           std::find(extra_eos_token_ids.begin(), extra_eos_token_ids.end(), token) != extra_eos_token_ids.end();
  }
  int max_decode_batch() const { return decode_batch_sizes.back(); }
  bool chunked_prefill() const { return !prefill_chunk_lengths.empty(); }
  bool prefix_caching() const { return prefix_cache_block_size > 0; }
};

// `parent`'s required `tokenizer` key as an absolute path (relative paths against model_dir); an error naming the
// key when it is empty or the file does not exist. Shared with the embedding section (embedding_config.h).
absl::StatusOr<std::string> ParseTokenizerPath(const YamlNode& parent, const std::string& model_dir);

// Parses and validates the section; `model_dir` resolves the tokenizer path. Errors name file:line and key.
absl::StatusOr<GenerationOptions> ParseGenerationOptions(const YamlNode& node, const std::string& model_dir);

}  // namespace sluice
