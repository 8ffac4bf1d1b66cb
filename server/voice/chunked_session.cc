#include "server/voice/chunked_session.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace sluice::voice {
namespace {

// Whole frames for `ms`, at least one.
int64_t FramesFor(int ms, int rate, int64_t frame_samples) {
  const int64_t samples = static_cast<int64_t>(ms) * rate / 1000;
  return std::max<int64_t>(1, (samples + frame_samples / 2) / frame_samples);
}

bool ValidThreshold(float t) { return std::isfinite(t) && t >= 0 && t <= 1; }

}  // namespace

absl::StatusOr<ChunkedSession> ChunkedSession::Create(const ChunkedSessionOptions& options,
                                                      const CtcDecoder* decoder) {
  if (options.frame_samples <= 0 || options.chunk_samples <= 0 || options.chunk_samples % options.frame_samples) {
    return absl::InvalidArgumentError(absl::StrCat("a stream chunk (", options.chunk_samples,
                                                   " samples) must be whole frames of ", options.frame_samples));
  }
  const EndpointOptions& e = options.endpoint;
  if (e.start_history_ms < 0 || e.start_history_ms > 60000 || e.stop_history_ms < 0 || e.stop_history_ms > 60000) {
    return absl::InvalidArgumentError("endpointing_config: start_history and stop_history must be 0..60000 ms");
  }
  if (!ValidThreshold(e.start_threshold) || !ValidThreshold(e.stop_threshold)) {
    return absl::InvalidArgumentError("endpointing_config: start_threshold and stop_threshold must be in [0, 1]");
  }
  ChunkedSession session(options, decoder);
  session.start_frames_ = FramesFor(e.start_history_ms, options.sample_rate, options.frame_samples);
  session.stop_frames_ = FramesFor(e.stop_history_ms, options.sample_rate, options.frame_samples);
  return session;
}

void ChunkedSession::AddAudio(std::span<const float> samples, absl::Time now) { audio_.Add(samples, now); }

void ChunkedSession::EndOfAudio(absl::Time now) { audio_.End(now); }

std::optional<StreamWindow> ChunkedSession::NextWindow() {
  if (in_flight_ || finished_) return std::nullopt;
  const int64_t backlog = audio_.received() - processed_;
  if (backlog <= 0 || (backlog < options_.chunk_samples && !audio_.ended())) return std::nullopt;
  StreamWindow window;
  window.start = processed_;
  window.end = processed_ + std::min(backlog, options_.chunk_samples);
  window.last = audio_.ended() && window.end == audio_.received();
  window.samples = audio_.Slice(window.start, window.end);
  in_flight_ = true;
  in_flight_end_ = window.end;
  in_flight_last_ = window.last;
  return window;
}

absl::StatusOr<WindowOutcome> ChunkedSession::OnWindowDone(const WindowLogProbs& log_probs, absl::Time now) {
  if (!in_flight_) return absl::FailedPreconditionError("no chunk in flight");
  in_flight_ = false;
  const int64_t samples = in_flight_end_ - processed_;
  const int64_t needed = (samples + options_.frame_samples - 1) / options_.frame_samples;
  if (log_probs.frames < needed || log_probs.classes <= 0 ||
      static_cast<int64_t>(log_probs.values.size()) < needed * log_probs.classes) {
    return absl::InternalError(absl::StrCat("the model returned ", log_probs.frames, " frames for a chunk of ",
                                            samples, " samples; expected ", needed));
  }
  classes_ = log_probs.classes;
  const int64_t first_new = static_cast<int64_t>(blank_.size());
  for (int64_t f = 0; f < needed; ++f) {
    const float* row = log_probs.values.data() + f * classes_;
    frames_.insert(frames_.end(), row, row + classes_);
    blank_.push_back(std::max_element(row, row + classes_) - row == options_.blank);
  }
  audio_.DropBefore(in_flight_end_);
  processed_ = in_flight_end_;
  UpdateSpeechStart(first_new);

  WindowOutcome outcome;
  outcome.chunk_latencies = audio_.TakeChunkLatencies(processed_, now);
  const double segment_seconds = static_cast<double>(processed_ - segment_start_) / options_.sample_rate;
  if (in_flight_last_) {
    outcome.results.push_back(Final());
    outcome.final_latency = now - audio_.ended_at();
    finished_ = true;
  } else if (AtEndpoint() || segment_seconds >= kMaxSegmentSeconds) {
    outcome.results.push_back(Final());
    if (auto arrival = audio_.last_done_arrival()) outcome.final_latency = now - *arrival;
    StartSegment();
  } else if (options_.interim_results) {
    StreamResult interim;
    interim.transcript = DecodeSegment();
    const auto last_blank = std::find(blank_.rbegin(), blank_.rend(), true);
    const int64_t stable = blank_.rend() - last_blank;  // frames up to and including the last blank one
    interim.stability = blank_.empty() ? 0.0f : static_cast<float>(stable) / static_cast<float>(blank_.size());
    interim.audio_processed = static_cast<double>(processed_) / options_.sample_rate;
    outcome.results.push_back(std::move(interim));
  }
  return outcome;
}

std::optional<WindowOutcome> ChunkedSession::TakeClosingResult(absl::Time now) {
  if (!audio_.ended() || finished_ || in_flight_ || processed_ < audio_.received()) return std::nullopt;
  WindowOutcome outcome;
  outcome.results.push_back(Final());
  outcome.final_latency = now - audio_.ended_at();
  finished_ = true;
  return outcome;
}

// Speech starts at the first window of start_frames_ frames ending at or after `from_frame` whose non-blank share
// reaches start_threshold.
void ChunkedSession::UpdateSpeechStart(int64_t from_frame) {
  const int64_t count = static_cast<int64_t>(blank_.size());
  for (int64_t end = std::max(from_frame + 1, start_frames_); !speech_started_ && end <= count; ++end) {
    const int64_t speech = std::count(blank_.begin() + (end - start_frames_), blank_.begin() + end, false);
    speech_started_ = speech > 0 && static_cast<float>(speech) >= options_.endpoint.start_threshold * start_frames_;
  }
}

bool ChunkedSession::AtEndpoint() const {
  const int64_t count = static_cast<int64_t>(blank_.size());
  if (!speech_started_ || count < stop_frames_) return false;
  const int64_t blanks = std::count(blank_.end() - stop_frames_, blank_.end(), true);
  return blanks > 0 && static_cast<float>(blanks) >= options_.endpoint.stop_threshold * stop_frames_;
}

Transcript ChunkedSession::DecodeSegment() const {
  const int64_t count = static_cast<int64_t>(blank_.size());
  const double frame_seconds = static_cast<double>(options_.frame_samples) / options_.sample_rate;
  return decoder_->Decode(frames_, count, classes_,
                          FrameTiming{.frame_seconds = frame_seconds,
                                      .offset_seconds = static_cast<double>(segment_start_) / options_.sample_rate});
}

StreamResult ChunkedSession::Final() {
  StreamResult result;
  result.transcript = DecodeSegment();
  result.is_final = true;
  result.stability = 1.0f;
  result.audio_processed = static_cast<double>(processed_) / options_.sample_rate;
  return result;
}

void ChunkedSession::StartSegment() {
  segment_start_ = processed_;
  frames_.clear();
  blank_.clear();
  speech_started_ = false;
}

}  // namespace sluice::voice
