// libtorch TorchScript GenerationBackend for devices cpu, cuda and neuron: one instance holds every prefill
// graph (graphs/prefill_l<L>.pt), prefill chunk graph (graphs/prefill_chunk_c<C>_k<K>.pt) and decode graph
// (graphs/decode_b<B>_k<K>.pt) of a generation model, warmed, and its KV cache, allocated once on the instance's
// device and updated in place by the graphs.
//
// Graph signatures (what backend/compile/llama_export.py exports):
//   prefill_l<L>:     forward(tokens int64[1, L], length int64[1], slot int64[1], k_cache, v_cache)
//                       -> logits f32[1, vocab] (of position length - 1)
//   prefill_chunk_c<C>_k<K> (when generation.prefill_chunk_lengths is set):
//                     forward(tokens int64[1, C], start int64[1], length int64[1], slot int64[1], k_cache, v_cache)
//                       -> logits f32[1, vocab] (of position start + length - 1); writes positions
//                       [start, start + length) of the slot, attends over its positions [0, K)
//   decode_b<B>_k<K>: forward(tokens int64[B], positions int64[B], slots int64[B], k_cache, v_cache)
//                       -> logits f32[B, vocab]
//   k_cache, v_cache: f32[layers, slots + 1, context_length, kv_heads, head_dim] (generation_config.h)
// An encoder-decoder's decoder (generation.cross_attention; backend/compile/whisper_export.py) takes more:
//   prefill_l<L>:     forward(tokens, length, slot, encoder_hidden f32[1, positions, hidden], k_cache, v_cache,
//                             cross_k, cross_v) -> logits f32[1, vocab]; writes the slot's cross K/V
//   decode_b<B>_k<K>: forward(tokens, positions, slots, k_cache, v_cache, cross_k, cross_v) -> logits f32[B, vocab]
// Padding: prompt tokens are padded with id 0 to the bucket (the graph takes the real length); decode rows are
// padded to B with token 0, position 0 and slot kv_cache.slots (the scratch slot). Warm-up runs every graph and
// writes only the scratch slot (prefill warm-up passes the scratch index straight to the graph).
//
// This header is torch-free on purpose: libtorch headers stay inside backend/*.cc.
// Thread-safety: as generation_backend.h (one calling thread at a time per instance; no lock needed).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backend/generation_backend.h"

namespace sluice {

// REQUIRES: options.model->generation is set; options.group.device is cpu, cuda or neuron.
absl::StatusOr<std::unique_ptr<GenerationBackend>> CreateTorchGenerationBackend(const InstanceOptions& options);

}  // namespace sluice
