#include "server/voice/whisper_stream_session.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::voice {

absl::StatusOr<WhisperStreamSession> WhisperStreamSession::Create(const WhisperStreamOptions& options) {
  if (options.sample_rate < 1 || options.window_samples < 1 || options.interim_step_samples < 1 ||
      options.interim_step_samples > options.window_samples || options.endpoint_silence_samples < 0 ||
      options.endpoint_min_speech_samples < 0 || options.vad_frame_samples < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a Whisper stream needs a positive sample rate, window, interim step and VAD frame, the step within the "
        "window, no negative endpointing lengths (rate ",
        options.sample_rate, ", window ", options.window_samples, " samples, step ", options.interim_step_samples,
        ")"));
  }
  return WhisperStreamSession(options);
}

void WhisperStreamSession::AddAudio(std::span<const float> samples, absl::Time now) {
  if (audio_.ended()) return;
  audio_.Add(samples, now);
  if (options_.endpoint_silence_samples > 0) Scan(samples);
}

void WhisperStreamSession::Scan(std::span<const float> samples) {
  const double threshold = static_cast<double>(options_.speech_rms) * options_.speech_rms;
  for (float sample : samples) {
    frame_energy_ += static_cast<double>(sample) * sample;
    if (++frame_fill_ < options_.vad_frame_samples) continue;
    const int64_t frame_start = frames_end_;
    frames_end_ += frame_fill_;
    const bool speech = frame_energy_ / static_cast<double>(frame_fill_) >= threshold;
    frame_energy_ = 0;
    frame_fill_ = 0;
    if (speech) {
      speech_samples_ += options_.vad_frame_samples;
      silence_start_ = -1;
      continue;
    }
    if (silence_start_ < 0) silence_start_ = frame_start;
    const bool spoke = speech_samples_ > 0 && speech_samples_ >= options_.endpoint_min_speech_samples;
    if (spoke && frames_end_ - silence_start_ >= options_.endpoint_silence_samples) {
      const int64_t cut = silence_start_ + options_.endpoint_silence_samples / 2;
      const int64_t after = cuts_.empty() ? segment_start_ : cuts_.back();
      if (cut > after) cuts_.push_back(cut);
      speech_samples_ = 0;  // the next segment needs speech of its own
    }
  }
}

// A segment starts at `start` (a cut or the end of a full window): speech counted before it is the old segment's.
void WhisperStreamSession::NewSegment(int64_t start) {
  segment_start_ = start;
  audio_.DropBefore(start);
  while (!cuts_.empty() && cuts_.front() <= start) cuts_.pop_front();
  if (silence_start_ >= 0 && silence_start_ <= start) {  // silence since before the start: no speech in it yet
    speech_samples_ = 0;
    silence_start_ = start;
  }
}

void WhisperStreamSession::EndOfAudio(absl::Time now) { audio_.End(now); }

std::optional<StreamWindow> WhisperStreamSession::NextWindow() {
  if (in_flight_ || finished_) return std::nullopt;
  const int64_t available = audio_.received() - segment_start_;
  const int64_t window_end = segment_start_ + options_.window_samples;
  if (!cuts_.empty() && cuts_.front() <= window_end) return StartRun(cuts_.front(), true);  // an endpoint
  if (available >= options_.window_samples) return StartRun(window_end, true);
  if (audio_.ended()) {
    if (available > 0) return StartRun(audio_.received(), true);
    return std::nullopt;
  }
  if (options_.interim_results && available > 0 &&
      audio_.received() - started_through_ >= options_.interim_step_samples) {
    return StartRun(audio_.received(), false);
  }
  return std::nullopt;
}

StreamWindow WhisperStreamSession::StartRun(int64_t end, bool final) {
  in_flight_ = true;
  run_end_ = end;
  run_final_ = final;
  started_through_ = end;
  return StreamWindow{.samples = audio_.Slice(segment_start_, end),
                      .start = segment_start_,
                      .end = end,
                      .last = final && audio_.ended() && end == audio_.received()};
}

absl::StatusOr<WindowOutcome> WhisperStreamSession::OnWindowDone(const WindowLogProbs&, absl::Time) {
  return absl::FailedPreconditionError("a Whisper stream's runs are recognitions, not log-probs");
}

absl::StatusOr<WindowOutcome> WhisperStreamSession::OnRecognitionDone(const Recognition& recognition,
                                                                     absl::Time now) {
  if (!in_flight_) return absl::FailedPreconditionError("no run of this stream is in flight");
  in_flight_ = false;
  WindowOutcome outcome;
  StreamResult& result = outcome.results.emplace_back();
  result.transcript = recognition.transcript;
  if (!recognition.word_times) result.transcript.words.clear();
  result.is_final = run_final_;
  result.audio_processed = static_cast<double>(run_end_) / options_.sample_rate;
  outcome.chunk_latencies = audio_.TakeChunkLatencies(run_end_, now);
  if (run_final_) {
    const bool at_end = audio_.ended() && run_end_ == audio_.received();
    if (at_end) {
      outcome.final_latency = now - audio_.ended_at();
    } else if (audio_.last_done_arrival()) {
      outcome.final_latency = now - *audio_.last_done_arrival();
    }
    NewSegment(run_end_);
    ++finals_;
  }
  return outcome;
}

std::optional<WindowOutcome> WhisperStreamSession::TakeClosingResult(absl::Time now) {
  if (!audio_.ended() || finished_ || in_flight_ || segment_start_ < audio_.received()) return std::nullopt;
  finished_ = true;
  if (finals_ > 0) return std::nullopt;  // every segment had its final
  WindowOutcome outcome;
  StreamResult& result = outcome.results.emplace_back();
  result.is_final = true;
  result.audio_processed = static_cast<double>(audio_.received()) / options_.sample_rate;
  outcome.final_latency = now - audio_.ended_at();
  return outcome;
}

}  // namespace sluice::voice
