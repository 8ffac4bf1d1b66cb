// The GenerationBackend seam: one instance of a text-generation model (decoder) on one device, holding every
// context-encoding (prefill) graph and every token-generation (decode) graph of the model, warmed, and the
// instance's KV cache, resident on the device for the instance's lifetime (never copied through the host).
// Slots of the cache are addressed by index; which sequence owns which slot is the engine's business.
//
// Padding is the backend's job: a prompt is padded to its prefill bucket, a decode batch to its batch bucket
// with padding rows that write only into the scratch slot. Padding never changes a real row's logits.
//
// Thread-safety: Prefill(), PrefillChunk(), CopyKv() and Decode() are called from one thread at a time per instance (the engine gives
// each instance one thread); different instances run concurrently. load_stats()/memory()/Describe() are immutable
// after Create().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "backend/sampler.h"

namespace sluice {

// One prompt into one slot: runs graphs/prefill_l<bucket_length>.pt. Writes the prompt's K/V into positions
// [0, tokens.size()) of `slot` (and an encoder-decoder's cross-attention K/V) and returns the logits of the last
// prompt position.
struct PrefillInput {
  int64_t bucket_length = 0;    // a compiled prefill length >= tokens.size()
  int slot = 0;                 // in [0, kv_cache.slots)
  std::vector<int32_t> tokens;  // the real prompt, 1..bucket_length ids
  // An encoder-decoder model's (generation.cross_attention set) encoder output for this sequence, row-major FP32
  // [encoder_positions, encoder_hidden]: the graph writes its cross-attention K/V into `slot`. Null otherwise.
  std::shared_ptr<const std::vector<float>> encoder_output;
};

// One chunk of a prompt into one slot whose positions [0, start) already hold this sequence's K/V (earlier
// chunks, or, later, a cached prefix): runs graphs/prefill_chunk_c<chunk_length>_k<kv_length>.pt. Writes the
// chunk's K/V at positions [start, start + tokens.size()) of `slot`, attends to the slot's positions
// [0, start + tokens.size()) causally, and returns the logits of the chunk's last real position. Padding rows of
// the chunk write only into the scratch slot: the slot's positions from start + tokens.size() on are untouched.
struct PrefillChunkInput {
  int64_t chunk_length = 0;     // a compiled chunk length >= tokens.size()
  int64_t kv_length = 0;        // a compiled KV length >= start + tokens.size()
  int slot = 0;                 // in [0, kv_cache.slots)
  int64_t start = 0;            // >= 0: the first position this chunk writes
  std::vector<int32_t> tokens;  // 1..chunk_length ids: the prompt's positions [start, start + size)
};

// Prefix caching (generation.prefix_cache_block_size set): copies positions [start, start + length) of
// `from_slot`'s K/V into the same positions of `to_slot`, on the device (never through the host). A cached prefix
// block held in another slot becomes part of the new sequence's slot this way.
struct KvCopyInput {
  int from_slot = 0;   // in [0, kv_cache.slots)
  int to_slot = 0;     // in [0, kv_cache.slots), != from_slot
  int64_t start = 0;   // >= 0
  int64_t length = 0;  // >= 1; start + length <= context_length
};

// One generated token of one running sequence: its id goes in at `position` (its K/V are written there), the
// logits for the next position come out.
struct DecodeRow {
  int32_t token = 0;
  int64_t position = 0;  // < kv_length of the step
  int slot = 0;
};

// One decode step: runs graphs/decode_b<batch_size>_k<kv_length>.pt. Each row attends to positions
// [0, position] of its slot.
struct DecodeInput {
  int batch_size = 0;           // a compiled decode batch size >= rows.size()
  int64_t kv_length = 0;        // a compiled KV length > every row's position
  std::vector<DecodeRow> rows;  // 1..batch_size real rows, distinct slots
  // Empty, or one per real row when nothing but the row's logits decides its next token (no suppressed or allowed
  // ids): a backend that can pick where the logits are (its device) may answer Logits::picked and no values, so
  // rows x 4 bytes leave the device instead of rows x vocab x 4; one that cannot (or, for these picks, would be
  // slower) returns the logits and the engine samples on the host with the same uniforms. The rules are Sampler's
  // (backend/sampler.h) and the uniform the engine's, so host and device draw the same token, up to float rounding
  // where the device sums in another order (an id within rounding of the draw or of the top_p boundary).
  std::vector<TokenPick> picks;
};

// Row-major [rows, vocab] FP32 logits, one row per real input row (padding rows are dropped).
struct Logits {
  int rows = 0;
  int vocab = 0;
  std::vector<float> values;
  // Instead of values, when a decode came with picks and the backend picked on its device: one id per real row.
  std::vector<int32_t> picked;
  const float* row(int r) const { return values.data() + static_cast<size_t>(r) * vocab; }
};

class GenerationBackend {
 public:
  // Creates the instance for options.group.device (cpu/cuda/neuron: TorchScript; neuron with runtime nrt: NEFFs
  // through libnrt, backend/nrt/; sim: the cost model),
  // allocating the KV cache and loading and warming every graph. Errors name the model, the graph and the file.
  // REQUIRES: options.model->generation is set.
  static absl::StatusOr<std::unique_ptr<GenerationBackend>> Create(const InstanceOptions& options);

  GenerationBackend() = default;
  GenerationBackend(const GenerationBackend&) = delete;
  GenerationBackend& operator=(const GenerationBackend&) = delete;
  virtual ~GenerationBackend() = default;

  // InvalidArgument for inputs outside the compiled shapes; Unavailable when the device is gone.
  virtual absl::StatusOr<Logits> Prefill(const PrefillInput& input) = 0;
  virtual absl::StatusOr<Logits> Decode(const DecodeInput& input) = 0;
  // Chunked prefill (generation.prefill_chunk_lengths set). A backend without chunk graphs answers Unimplemented.
  virtual absl::StatusOr<Logits> PrefillChunk(const PrefillChunkInput& input) {
    return absl::UnimplementedError(absl::StrCat("this backend has no prefill chunk graphs (chunk ",
                                                 input.chunk_length, ", KV length ", input.kv_length, ")"));
  }

  // Prefix caching. A backend that cannot copy KV between slots answers Unimplemented.
  virtual absl::Status CopyKv(const KvCopyInput& input) {
    return absl::UnimplementedError(absl::StrCat("this backend cannot copy KV between slots (prefix caching): slot ",
                                                 input.from_slot, " to ", input.to_slot));
  }

  // One entry per graph: prefill graphs have batch_size 1 and length = the prompt bucket; decode graphs have
  // batch_size = the batch bucket and length = the KV length; chunk graphs batch_size 1 and length = the chunk.
  virtual const std::vector<BucketLoadStats>& load_stats() const = 0;
  // Weights, KV cache and graphs this instance holds (immutable after Create()).
  virtual InstanceMemory memory() const { return {}; }
  // e.g. "llama_tiny#0 on cpu (1 intra-op thread, KV cache 16 slots x 1024 positions, 33.6 MB)"
  virtual std::string Describe() const = 0;
};

}  // namespace sluice
