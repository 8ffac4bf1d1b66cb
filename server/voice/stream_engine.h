// The stream engine of one cache-aware streaming speech model (speech.stream_step): every open stream of the
// model holds one state slot of the model's StreamStepBackend, and all of them step on one shared tick. A step
// batches the next chunk of every stream that has one (at most the largest stream batch size; the rest join the
// next step), padded to a compiled batch size with padding rows on the scratch slot. Streams join (AcquireSlot) and
// leave (ReleaseSlot) at any tick.
//
// The tick: the step thread starts a step once every stream holding a slot has a chunk waiting, or once the oldest
// waiting chunk has waited max_wait (speech.stream_step.max_wait_ms), or at once when the previous step left
// chunks behind; a stream that sends faster than real time submits its next chunk from its completion, in time for
// the next step. No slot free: AcquireSlot refuses (RESOURCE_EXHAUSTED) rather than queueing the stream: a stream
// that waits for a slot would fall behind its own audio.
//
// Thread-safety: every method may be called from any thread. Completions run on the step thread (outside the
// engine's lock), or on ReleaseSlot's / the destructor's caller (Cancelled) for a chunk that never ran; they may
// call Submit and ReleaseSlot. mu_ is a leaf lock: nothing is called under it.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/model_config.h"
#include "backend/base/sync.h"
#include "backend/stream_step_backend.h"
#include "server/metrics/model_stats.h"
#include "server/voice/speech_model.h"
#include "server/voice/voice_metrics.h"

namespace sluice::voice {

// A chunk's log-probs: [frames, classes], frames = ceil(samples / frame_samples) (a short last chunk is trimmed).
using ChunkDone = std::function<void(absl::StatusOr<WindowLogProbs>)>;

struct StreamEngineOptions {
  const ModelConfig* config = nullptr;      // a speech model; must outlive the engine
  StreamStepBackend* backend = nullptr;     // the model's (its options() are the engine's); must outlive it
  ModelStats* stats = nullptr;              // optional: each row recorded as one inference (rows per execution)
  VoiceMetrics* metrics = nullptr;          // optional: computed audio
};

class StreamEngine {
 public:
  static absl::StatusOr<std::unique_ptr<StreamEngine>> Create(const StreamEngineOptions& options);
  StreamEngine(const StreamEngine&) = delete;
  StreamEngine& operator=(const StreamEngine&) = delete;
  // Stop(), then the engine goes.
  ~StreamEngine();
  // Stops the step thread after its step; chunks still waiting, and any submitted later, complete with Cancelled.
  // Idempotent. REQUIRES: not called from a completion.
  void Stop();

  // A free slot, or ResourceExhausted naming the model and its slot count.
  absl::StatusOr<int> AcquireSlot();
  // Queues the slot's next chunk (1..chunk_samples samples; fewer only as the stream's last). `reset`: the stream's
  // first chunk. REQUIRES: the slot is held and has no chunk waiting or running. InvalidArgument (done called on this
  // thread) otherwise.
  void Submit(int slot, std::vector<float> samples, bool reset, ChunkDone done);
  // Gives the slot back: a chunk of it still waiting completes with Cancelled on this thread; one running finishes
  // first (the slot is reused only after). REQUIRES: not under a lock the completion takes.
  void ReleaseSlot(int slot);

  int64_t chunk_samples() const { return step_.chunk_samples; }
  int slots() const { return step_.slots; }
  const ModelConfig& config() const { return *config_; }
  struct Counters {
    int64_t steps = 0;
    int64_t rows = 0;
  };
  Counters counters() const;

 private:
  explicit StreamEngine(const StreamEngineOptions& options);
  void StepLoop();
  // Waits for the tick; returns the chunks of the next step (empty when stopping).
  struct Pending {
    int slot = 0;
    bool reset = false;
    std::vector<float> samples;
    ChunkDone done;
    absl::Time queued;
  };
  std::vector<Pending> NextStep() ABSL_LOCKS_EXCLUDED(mu_);
  void RunStep(std::vector<Pending> rows) ABSL_LOCKS_EXCLUDED(mu_);
  int BatchSizeFor(int rows) const;

  const ModelConfig* const config_;
  const StreamStepOptions step_;
  StreamStepBackend* const backend_;
  ModelStats* const stats_;
  VoiceMetrics* const metrics_;
  const absl::Duration max_wait_;

  mutable Mutex mu_;
  CondVar work_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<bool> held_ ABSL_GUARDED_BY(mu_);        // by slot: a stream owns it
  // By slot: its chunk is in the current step (a slot released meanwhile is reused only after the step).
  std::vector<bool> running_ ABSL_GUARDED_BY(mu_);
  int held_count_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);   // oldest first
  Counters counters_ ABSL_GUARDED_BY(mu_);
  std::once_flag joined_;
  std::thread thread_;  // last: started after everything above
};

}  // namespace sluice::voice
