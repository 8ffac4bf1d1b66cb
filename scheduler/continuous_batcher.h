// The generation engine: continuous batching over static KV-cache slots, one per model (all its instances).
//
// A waiting queue (bounded: model generation.max_queue_size) feeds every instance. Each instance has its own
// engine thread, its own KV cache (kv_cache.slots slots) and runs at most max_num_seqs sequences. One iteration
// of an instance:
//   1. finish sequences whose deadline passed or that were cancelled (their slots free at once);
//   2. admit waiting sequences into free slots, oldest first, while the iteration's prompt tokens stay within
//      prefill_token_budget (a prompt longer than the remaining budget waits for the next iteration, unless
//      nothing was admitted yet); each admitted prompt runs its prefill graph (batch 1, its prompt bucket) and
//      its first token is sampled and delivered;
//   3. run one decode step for every running sequence that has a token to feed (batch padded to the smallest
//      batch bucket >= rows, KV length the smallest bucket > the largest position), sample, deliver, and finish
//      sequences on EOS, a stop id, on_token returning false, max_tokens, or a full context.
// The policy trades TTFT against inter-token latency: prefills run before the decode step of the same
// iteration, so a newly admitted prompt delays every running sequence's next token by its prefill time; the
// budget bounds that delay per iteration.
//
// Chunked prefill (generation.prefill_chunk_lengths set): step 2 admits into every free slot without running
// anything; an admitted prompt is written into its slot chunk by chunk (PrefillChunk, a compiled chunk length
// each, the slot's earlier positions already written), and each iteration runs the decode step of the sequences
// running at its start plus chunks, oldest prompt first, while the tokens stay within iteration_token_budget (a
// decode row counts 1, a chunk its real tokens; the iteration's first chunk always runs). decode_first puts the
// decode step before the chunks. So a long prompt delays running sequences by about one budget's chunks per
// step instead of its whole prefill; its own first token comes later (more calls). A prompt's last chunk samples
// its first token; a sequence cancelled or past its deadline mid-prompt frees its slot at the next iteration.
//
// Prefix caching (generation.prefix_cache_block_size set; chunked prefill only): each instance keeps a
// PrefixBlockTable over its own cache. At admission a prompt's leading full blocks are looked up (never all of
// it: at least its last token is prefilled); the slot it takes is the one its hit lives in when that is free
// (no copy), else the least recently used free slot; hit blocks held in other slots are copied into it
// device-side (GenerationBackend::CopyKv) at the start of the iteration, before any chunk, and the prompt is
// prefilled from the first uncached position with the chunk graphs. Each chunk's newly full blocks are entered
// in the table; a finished sequence's blocks stay cached in its free slot until that slot is given to another.
//
// Watchdog: a Prefill/Decode call still running after generation.execution_timeout_ms (0: none) has every
// sequence its instance holds answered UNAVAILABLE (naming the model, the graph and the instance) and the
// instance leaves rotation for good, as when its device is gone; the step observer gets a report with timed_out.
//
// Sampling on the device: each sampled token takes its uniform from the sequence's generator before the step
// (Sampler::Uniform), so a token is the same whether the host or the device picks it. A decode step with no ids
// masked in any row passes every row's TokenPick (backend/generation_backend.h); a backend that picks where the
// logits are (TorchScript: greedy rows always, sampled rows on a GPU) returns one id per row and the logits never
// reach the host. Otherwise the engine samples with the same uniforms.
//
// Delivery: the engine thread samples; it never runs client code. Each instance has a DeliveryLane (a thread)
// that runs its sequences' on_token and on_done in the order the engine produced them, while the next step
// computes: a step's tokens are handed over before the next backend call, and the engine waits only while more
// than one earlier hand-over is queued. So on_token returning false is seen by the engine an iteration or two
// later: the sequence may compute a step or two more, whose tokens are never delivered; it is answered OK/kStop
// with output_tokens = the on_token calls made.
//
// Threads: one engine thread and one delivery thread per instance (the engine thread alone runs that instance's
// graphs and owns its running sequences, see Instance in the .cc), and a watchdog thread when the timeout is set.
// Every public method is safe from any thread. Lock order: the batcher's mu_ is a leaf (the clock's own lock
// below it), never held while a graph runs or while handing work to a lane (whose lock is a leaf too).
// on_token and on_done run on the sequence's instance's delivery thread, or (a sequence never admitted:
// cancelled or expired while waiting, or stranded with no instance left) on a Cancel() caller's, an engine or the
// watchdog thread; the step observer on an engine thread (a timeout: the watchdog). Callbacks never run under
// mu_; they may call Enqueue() and Cancel(), never Stop() or the destructor. Stop() joins every engine thread but a
// timed-out one's (its backend may never return); the destructor waits for that one too.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/model_config.h"
#include "backend/generation_backend.h"
#include "scheduler/clock.h"
#include "scheduler/generation_request.h"
#include "scheduler/prefix_block_table.h"

namespace sluice {

// What one engine step did, for metrics: a prefill (batch 1), a prefill chunk (batch 1) or a decode step.
struct GenerationStepReport {
  int instance = 0;
  bool prefill = false;
  int batch_size = 0;      // compiled batch size (1 for prefill)
  int rows = 0;            // real sequences in it
  int64_t length = 0;      // prefill: prompt bucket; decode: KV-length bucket
  int64_t real_tokens = 0; // prefill: prompt tokens; decode: rows
  absl::Duration compute;
  bool ok = true;
  bool timed_out = false;  // ran past execution_timeout_ms: its sequences answered, its instance out of rotation
  bool chunk = false;      // a prefill chunk (prefill is true; length: the chunk bucket; real_tokens: its tokens)
};
using GenerationStepObserver = std::function<void(const GenerationStepReport&)>;

struct ContinuousBatcherOptions {
  const ModelConfig* model = nullptr;              // must outlive the batcher; model->generation is set
  std::vector<GenerationBackend*> instances;       // not owned; must outlive the batcher; at least one
  Clock* clock = &Clock::Real();
  GenerationStepObserver observer;                 // optional; called on engine threads (a timeout: the watchdog)
  uint64_t seed = 0x5eed;                          // the engine's generator, for requests without a seed
};

class ContinuousBatcher {
 public:
  static absl::StatusOr<std::unique_ptr<ContinuousBatcher>> Create(const ContinuousBatcherOptions& options);
  ContinuousBatcher(const ContinuousBatcher&) = delete;
  ContinuousBatcher& operator=(const ContinuousBatcher&) = delete;
  ~ContinuousBatcher();  // Stop()s

  // OK: accepted; on_done will be called exactly once. Errors (on_done never called): InvalidArgument (empty
  // prompt, prompt longer than the largest prefill bucket, prompt + max_tokens over the context length,
  // max_tokens < 1, token ids outside the vocabulary, bad sampling parameters), ResourceExhausted (waiting queue
  // full), Unavailable (stopping), DeadlineExceeded (deadline already passed).
  absl::StatusOr<SequenceId> Enqueue(GenerationRequest request);

  // Finishes the sequence with kCancelled/CANCELLED and frees its slot. A waiting sequence is answered on the
  // caller's thread before Cancel returns; a running one on its engine thread at the start of the next
  // iteration (no further on_token after Cancel returns is not promised: at most the token of a step already
  // running). Unknown or finished ids: no effect.
  void Cancel(SequenceId id);

  // Refuses new requests, lets running and waiting sequences finish, then joins the engine threads. Idempotent.
  void Stop();

  int Waiting() const;      // accepted, not yet admitted to a slot
  int Running() const;      // holding a slot
  int SlotsInUse() const;   // == Running(); kept apart for the metric's name
  int TotalSlots() const;   // max_num_seqs (bounded by kv_cache.slots) * instances
  // Instances still running sequences. One whose backend answers Unavailable (its device is gone) or whose call
  // ran past execution_timeout_ms is taken out for good: its sequences fail UNAVAILABLE and waiting ones go to
  // the others; with none left, waiting and new requests are answered UNAVAILABLE.
  int InstancesInRotation() const;
  // Prefix caching's counters and block gauges, summed over instances (all zero when it is off).
  PrefixCacheCounters PrefixCache() const;

  const ModelConfig& model() const;

 private:
  class Impl;
  explicit ContinuousBatcher(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace sluice
