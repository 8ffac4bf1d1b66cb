// The `sim` device for generation models (kind: generation, device: sim): no graph and no libtorch, a latency
// that follows the model's `sim:` cost model, and logits that are a deterministic function of what was written
// into the KV cache, so that an engine which mixes up slots, positions or tokens produces visibly different
// tokens. For engine tests and capacity planning without hardware.
//
// Latency (SimCostModel base_ms and per_sample_us; output_steps_per_input_step is not allowed here):
//   prefill:  base_ms + per_sample_us * bucket_length                    (the compiled prompt bucket)
//   chunk:    base_ms + per_sample_us * chunk_length                    (the compiled chunk; attention over the
//             slot's earlier positions is not modelled: a chunk costs what a prefill of its length costs)
//   decode:   base_ms + per_sample_us * batch_size * kv_length / 64      (the compiled batch and KV buckets)
//   KV copy:  per_sample_us * length / 64          (prefix caching: a device-side copy, memory-bound, no launch
//             cost modelled: one decode row's worth of cache traffic over the copied positions)
// spent through the injected sleeper before the call returns. Faults (sim: {faults: ...}) are drawn once per
// Prefill, PrefillChunk, CopyKv or Decode call as in sim_backend.h (sim_faults.h): a call that blocks for hang_ms after
// hang_after_batches calls (the engine's execution_timeout_ms watchdog is what answers it), Unavailable after
// gone_after_batches calls, std::runtime_error thrown with probability exception_rate, Internal with probability
// error_rate.
//
// Logits contract (other code's tests compute expected tokens from it; SimNextToken implements it):
//   The sim keeps, per slot, the token id written at each position (0 where nothing was ever written; a slot
//   that is reused keeps the previous sequence's ids past what the new one wrote, as a real cache does).
//   Prefill writes tokens[i] at position i, i in [0, n), of its slot; a prefill chunk writes tokens[i] at
//   position start + i (p = start + n - 1), leaving the slot's other positions as they were. A decode row writes its token at its
//   position of its slot. For a row whose last written position is p (prefill: p = n - 1; decode: p = the row's
//   position), with t(i) the id at position i of that slot after the write:
//       next = (31 * t(p) + 7 * p + t(0) + t(1) + ... + t(p)) mod vocab_size     (computed in int64)
//   and the row's logits are 10.0 at next, 9.0 at (next + 1) mod vocab_size, 0.0 at every other id
//   (vocab_size 1: the one logit is 10.0). A decode row reads its slot's ids at positions < p, so a wrong slot,
//   a skipped position or a wrong token changes the answer. CopyKv copies the ids at positions [start, start +
//   length) of from_slot to the same positions of to_slot. Padding (prompt positions past n, decode rows past
//   rows.size()) writes nothing: real slots are never touched by padding.
//
// Picking (sim: {picks_tokens: true}, off by default): a decode step the engine offers picks for
// (DecodeInput::picks) is answered with Logits::picked, each row's token drawn from the contract's logits by the
// row's TokenPick with the shared Sampler (backend/sampler.h), as a GPU backend that samples in its graph: the picks
// run inside the modeled step time (with the real sleeper the step still lasts exactly its modeled time). Off, the
// logits are returned and the engine samples on the host.
//
// Thread-safety: as generation_backend.h: Prefill()/PrefillChunk()/CopyKv()/Decode() from one thread at a time per instance
// (no lock: the cache state belongs to that one caller); load_stats()/Describe() immutable after creation.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/generation_backend.h"
#include "backend/sim_backend.h"

namespace sluice {

// REQUIRES: options.model->generation and options.model->sim are set; options.group.device is sim.
// `sleeper` defaults to absl::SleepFor; tests inject a fake clock's advance.
absl::StatusOr<std::unique_ptr<GenerationBackend>> CreateSimGenerationBackend(const InstanceOptions& options,
                                                                              SimSleeper sleeper = {});

// The latencies of the cost model above.
absl::Duration SimPrefillLatency(const SimCostModel& cost, int64_t bucket_length);
absl::Duration SimPrefillChunkLatency(const SimCostModel& cost, int64_t chunk_length, int64_t kv_length);
absl::Duration SimDecodeLatency(const SimCostModel& cost, int batch_size, int64_t kv_length);
absl::Duration SimKvCopyLatency(const SimCostModel& cost, int64_t length);

// The contract's argmax for a slot whose ids at positions [0, p] are `ids` (p = ids.size() - 1).
// REQUIRES: ids is not empty; vocab_size >= 1.
int32_t SimNextToken(std::span<const int32_t> ids, int vocab_size);

}  // namespace sluice
