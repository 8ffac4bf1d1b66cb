#include "server/voice/offline_recognition.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice::voice {

int OfflineRecognition::MaxWindowsInFlight(const SpeechModel& model) {
  const int queue = model.config().batching.max_queue_size;
  return std::max(1, std::min(2 * model.config().max_batch_size(), queue > 0 ? queue : 1));
}

OfflineRecognition::OfflineRecognition(const SpeechModel* model, const CtcDecoder* decoder,
                                       std::vector<float> audio, absl::Time deadline, OfflineDone done)
    : model_(model), decoder_(decoder), audio_(std::move(audio)), deadline_(deadline), done_(std::move(done)) {}

std::shared_ptr<OfflineRecognition> OfflineRecognition::Start(const SpeechModel* model, const CtcDecoder* decoder,
                                                              std::vector<float> audio, absl::Time deadline,
                                                              OfflineDone done) {
  auto self = std::make_shared<OfflineRecognition>(model, decoder, std::move(audio), deadline, std::move(done));
  const int64_t overlap =
      static_cast<int64_t>(model->speech().long_audio_overlap_ms) * model->sample_rate() / 1000;
  const int64_t per_frame = model->speech().frame_samples;
  // Windows are whole frames long so that every window's frames line up with the recording's.
  const int64_t window = model->max_window_samples() / per_frame * per_frame;
  absl::StatusOr<std::vector<AudioWindow>> plan = PlanWindows(
      static_cast<int64_t>(self->audio_.size()),
      WindowPlanOptions{.window_samples = window,
                        .overlap_samples = overlap / per_frame * per_frame,
                        .samples_per_frame = per_frame,
                        .frames_for_samples = [model](int64_t samples) { return model->FramesFor(samples); }});
  if (!plan.ok()) {
    self->Fail(absl::InvalidArgumentError(absl::StrCat("model '", model->name(),
                                                       "' cannot window this audio: ", plan.status().message())));
    return self;
  }
  if (plan->empty()) {  // no windows would mean no completion: refuse instead (DecodeAudio refuses it first)
    self->Fail(absl::InvalidArgumentError("empty audio: nothing to recognise"));
    return self;
  }
  self->plan_ = *std::move(plan);
  {
    MutexLock lock(&self->mu_);
    self->window_log_probs_.resize(self->plan_.size());
    self->window_finished_.resize(self->plan_.size());
    self->handles_.resize(self->plan_.size());
  }
  self->SubmitMore();
  return self;
}

void OfflineRecognition::SubmitMore() {
  const int limit = MaxWindowsInFlight(*model_);
  for (;;) {
    size_t index;
    {
      MutexLock lock(&mu_);
      if (answered_ || next_window_ >= plan_.size() || in_flight_ >= limit) return;
      index = next_window_++;
      ++in_flight_;
    }
    const AudioWindow& window = plan_[index];
    std::vector<float> samples(audio_.begin() + window.start_sample,
                               audio_.begin() + window.start_sample + window.num_samples);
    // Not under mu_: a refused window completes on this thread, inside Run. Every window, the first included,
    // continues the call the caller admitted (a drain begun since does not refuse it).
    InferHandle handle = model_->Run(std::move(samples), deadline_, /*continues_admitted=*/true,
                                     [self = shared_from_this(), index](absl::StatusOr<WindowLogProbs> result) {
                                       self->OnWindow(index, std::move(result));
                                     });
    bool unwanted;
    {
      MutexLock lock(&mu_);
      // Answered meanwhile (by this window's refusal, another window's failure, a cancel): handles_ is gone.
      unwanted = answered_;
      if (!unwanted && !window_finished_[index]) handles_[index] = std::move(handle);
    }
    if (unwanted) {
      handle.Cancel();  // withdraws it if it is still queued; its completion then finds the answer given
      return;
    }
  }
}

void OfflineRecognition::OnWindow(size_t index, absl::StatusOr<WindowLogProbs> result) {
  bool all_done = false;
  {
    MutexLock lock(&mu_);
    --in_flight_;
    if (answered_) return;
    window_finished_[index] = true;
    handles_[index] = InferHandle();
    if (result.ok()) {
      window_log_probs_[index] = std::move(result->values);
      all_done = ++completed_ == plan_.size();
    }
  }
  if (!result.ok()) {
    Fail(result.status());
    return;
  }
  if (all_done) {
    Finish();
  } else {
    SubmitMore();
  }
}

bool OfflineRecognition::Claim() {
  MutexLock lock(&mu_);
  if (answered_) return false;
  answered_ = true;
  return true;
}

void OfflineRecognition::Fail(const absl::Status& status) {
  std::vector<InferHandle> handles;
  {
    MutexLock lock(&mu_);
    if (answered_) return;
    answered_ = true;  // from here on no handle is stored (SubmitMore cancels the ones that come back)
    handles.swap(handles_);
  }
  for (const InferHandle& handle : handles) handle.Cancel();  // the other windows' work is no longer wanted
  done_(status);
}

void OfflineRecognition::Cancel() { Fail(absl::CancelledError("the client cancelled the recognition")); }

void OfflineRecognition::Finish() {
  if (!Claim()) return;
  std::vector<std::vector<float>> windows;
  {
    MutexLock lock(&mu_);
    windows.swap(window_log_probs_);
  }
  const int64_t classes = static_cast<int64_t>(model_->speech().vocabulary.size());
  absl::StatusOr<std::vector<float>> stitched = Stitch(plan_, windows, classes);
  if (!stitched.ok()) {
    done_(absl::InternalError(absl::StrCat("model '", model_->name(), "': ", stitched.status().message())));
    return;
  }
  const int64_t frames = static_cast<int64_t>(stitched->size()) / classes;
  const double frame_seconds = static_cast<double>(model_->speech().frame_samples) / model_->sample_rate();
  OfflineResult result;
  result.transcript = decoder_->Decode(*stitched, frames, classes, FrameTiming{.frame_seconds = frame_seconds});
  result.windows = static_cast<int64_t>(plan_.size());
  result.audio_seconds = static_cast<double>(audio_.size()) / model_->sample_rate();
  done_(std::move(result));
}

}  // namespace sluice::voice
