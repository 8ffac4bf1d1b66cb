#include "server/voice/streaming_session.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sluice::voice {
namespace {

int64_t MsToSamples(int64_t ms, int rate) { return ms * rate / 1000; }

int64_t Argmax(std::span<const float> row) {
  return std::max_element(row.begin(), row.end()) - row.begin();
}

}  // namespace

absl::StatusOr<StreamingSession> StreamingSession::Create(const StreamingSessionOptions& options,
                                                          const CtcDecoder* decoder) {
  StreamingSession session(options, decoder);
  const int64_t fs = options.frame_samples;
  session.context_samples_ = MsToSamples(options.streaming.left_context_ms, options.sample_rate) / fs * fs;
  session.lookahead_samples_ = MsToSamples(options.streaming.lookahead_ms, options.sample_rate);
  session.step_samples_ = std::max<int64_t>(1, MsToSamples(options.streaming.step_ms, options.sample_rate));
  session.endpoint_frames_ =
      std::max<int64_t>(1, MsToSamples(options.streaming.endpoint_silence_ms, options.sample_rate) / fs);
  // A window holds the left context, the provisional frames and a step: it must fit the largest bucket, with a
  // frame to spare so that every window commits something.
  const int64_t needed = session.context_samples_ + session.lookahead_samples_ + session.step_samples_ + fs;
  if (needed > options.max_window_samples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "streaming: left_context_ms + lookahead_ms + step_ms (", needed * 1000 / options.sample_rate,
        " ms with a frame) must fit the largest bucket (", options.max_window_samples * 1000 / options.sample_rate,
        " ms)"));
  }
  return session;
}

void StreamingSession::AddAudio(std::span<const float> samples, absl::Time now) { audio_.Add(samples, now); }

void StreamingSession::EndOfAudio(absl::Time now) { audio_.End(now); }

int64_t StreamingSession::commit_sample() const {
  const int64_t frames = classes_ == 0 ? 0 : static_cast<int64_t>(committed_.size()) / classes_;
  return segment_start_ + frames * options_.frame_samples;
}

int64_t StreamingSession::NextWindowStart() const {
  return std::max(segment_start_, commit_sample() - context_samples_);
}

std::optional<StreamWindow> StreamingSession::NextWindow() {
  if (in_flight_ || finished_) return std::nullopt;
  const int64_t backlog = audio_.received() - processed_;
  if (backlog <= 0) return std::nullopt;
  if (!audio_.ended()) {
    const bool ready = options_.ticked ? (tick_due_ && backlog >= std::max<int64_t>(1, step_samples_ / 2)) ||
                                             backlog >= 2 * step_samples_
                                       : backlog >= step_samples_;
    if (!ready) return std::nullopt;
  }
  tick_due_ = false;
  StreamWindow window;
  window.start = NextWindowStart();
  window.end = std::min(audio_.received(), window.start + options_.max_window_samples);
  window.last = audio_.ended() && window.end == audio_.received();
  window.samples = audio_.Slice(window.start, window.end);
  in_flight_.emplace();  // the bounds only: the samples go to the model
  in_flight_->start = window.start;
  in_flight_->end = window.end;
  in_flight_->last = window.last;
  return window;
}

absl::StatusOr<WindowOutcome> StreamingSession::OnWindowDone(const WindowLogProbs& log_probs, absl::Time now) {
  if (!in_flight_) return absl::FailedPreconditionError("no window in flight");
  const StreamWindow window = *in_flight_;
  in_flight_.reset();
  const int64_t fs = options_.frame_samples;
  const int64_t needed = (window.end - window.start + fs - 1) / fs;
  if (log_probs.frames < needed || log_probs.classes <= 0) {
    return absl::InternalError(absl::StrCat("the model returned ", log_probs.frames, " frames for ",
                                            window.end - window.start, " samples; expected ", needed));
  }
  classes_ = log_probs.classes;
  // Frames before the commit point were decided by earlier windows; those within the lookahead of the window's
  // end stay provisional unless the audio has ended.
  const int64_t first = (commit_sample() - window.start) / fs;
  const int64_t stable_end =
      window.last ? needed : std::clamp((window.end - lookahead_samples_ - window.start) / fs, first, needed);
  const auto frame = [&](int64_t f) { return log_probs.values.begin() + f * classes_; };
  committed_.insert(committed_.end(), frame(first), frame(stable_end));
  provisional_.assign(frame(stable_end), frame(needed));
  processed_ = window.end;

  WindowOutcome outcome;
  outcome.chunk_latencies = audio_.TakeChunkLatencies(processed_, now);
  const double segment_seconds = static_cast<double>(processed_ - segment_start_) / options_.sample_rate;
  if (window.last) {
    outcome.results.push_back(Final());
    outcome.final_latency = now - audio_.ended_at();
    finished_ = true;
  } else if (AtEndpoint() || segment_seconds >= kMaxSegmentSeconds) {
    outcome.results.push_back(Final());
    if (auto arrival = audio_.last_done_arrival()) outcome.final_latency = now - *arrival;
    StartSegment(processed_);
  } else if (options_.interim_results) {
    StreamResult interim;
    interim.transcript = DecodeSegment();
    const size_t total = committed_.size() + provisional_.size();
    interim.stability = total == 0 ? 0.0f : static_cast<float>(committed_.size()) / static_cast<float>(total);
    interim.audio_processed = static_cast<double>(processed_) / options_.sample_rate;
    outcome.results.push_back(std::move(interim));
  }
  if (!finished_) audio_.DropBefore(NextWindowStart());
  return outcome;
}

std::optional<WindowOutcome> StreamingSession::TakeClosingResult(absl::Time now) {
  if (!audio_.ended() || finished_ || in_flight_ || processed_ < audio_.received()) return std::nullopt;
  WindowOutcome outcome;
  outcome.results.push_back(Final());
  outcome.final_latency = now - audio_.ended_at();
  finished_ = true;
  return outcome;
}

Transcript StreamingSession::DecodeSegment() const {
  std::vector<float> frames(committed_);
  frames.insert(frames.end(), provisional_.begin(), provisional_.end());
  const int64_t count = classes_ == 0 ? 0 : static_cast<int64_t>(frames.size()) / classes_;
  const double frame_seconds = static_cast<double>(options_.frame_samples) / options_.sample_rate;
  return decoder_->Decode(frames, count, classes_,
                          FrameTiming{.frame_seconds = frame_seconds,
                                      .offset_seconds = static_cast<double>(segment_start_) / options_.sample_rate});
}

// The segment's output ends in endpoint_frames_ blank frames, and some frame before them is not blank (speech).
bool StreamingSession::AtEndpoint() const {
  std::vector<float> frames(committed_);
  frames.insert(frames.end(), provisional_.begin(), provisional_.end());
  const int64_t count = classes_ == 0 ? 0 : static_cast<int64_t>(frames.size()) / classes_;
  if (count <= endpoint_frames_) return false;
  const int blank = options_.blank;
  const auto row = [&](int64_t f) { return std::span<const float>(frames.data() + f * classes_, classes_); };
  for (int64_t f = count - endpoint_frames_; f < count; ++f) {
    if (Argmax(row(f)) != blank) return false;
  }
  for (int64_t f = 0; f < count - endpoint_frames_; ++f) {
    if (Argmax(row(f)) != blank) return true;
  }
  return false;
}

StreamResult StreamingSession::Final() {
  StreamResult result;
  result.transcript = DecodeSegment();
  result.is_final = true;
  result.stability = 1.0f;
  result.audio_processed = static_cast<double>(processed_) / options_.sample_rate;
  return result;
}

void StreamingSession::StartSegment(int64_t at) {
  segment_start_ = at;
  committed_.clear();
  provisional_.clear();
}

}  // namespace sluice::voice
