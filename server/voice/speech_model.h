// One speech model as the voice API sees it: a ServedModel with a `speech:` section, whose audio windows run
// through the one request path (ServedModel::Infer) — the same validation, scheduler, statistics and metrics as
// KServe v2 requests, so the windows of every file and every stream batch with each other and with other traffic.
// Thread-safety: immutable after construction; Run may be called from any thread. A window's completion runs on
// the caller's thread when the window is refused before queueing, otherwise on a scheduler thread; it must not
// block.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/core/served_model.h"

namespace sluice::voice {

// The decoded output of one window: row-major [frames, classes] natural-log probabilities.
struct WindowLogProbs {
  std::vector<float> values;
  int64_t frames = 0;
  int64_t classes = 0;
};

using WindowDone = std::function<void(absl::StatusOr<WindowLogProbs>)>;

class SpeechModel {
 public:
  // FailedPrecondition naming the model when it cannot serve the voice API (no speech section, or other inputs
  // than the audio).
  static absl::StatusOr<SpeechModel> Create(ServedModel* model);

  const std::string& name() const { return model_->config().name; }
  const ModelConfig& config() const { return model_->config(); }
  const SpeechOptions& speech() const { return *model_->config().speech; }
  int sample_rate() const { return *model_->config().inputs.front().sample_rate; }
  // The largest bucket: the longest audio one run can take.
  int64_t max_window_samples() const { return model_->config().max_length(); }
  // Output frames the model gives for `samples` of audio (ceil(samples / frame_samples)).
  int64_t FramesFor(int64_t samples) const;
  ServedModel& served() const { return *model_; }

  // Runs `samples` (mono, at sample_rate(), 1..max_window_samples()) as one request. `deadline` bounds the wait.
  // `continues_admitted`: the window belongs to a call admitted with ServingState::Admit, whose admission the
  // caller holds: not refused for draining (InferCall::continues_admitted).
  InferHandle Run(std::vector<float> samples, absl::Time deadline, bool continues_admitted, WindowDone done) const;

 private:
  explicit SpeechModel(ServedModel* model) : model_(model) {}
  ServedModel* model_;
};

}  // namespace sluice::voice
