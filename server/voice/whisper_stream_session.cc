#include "server/voice/whisper_stream_session.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace sluice::voice {

absl::StatusOr<WhisperStreamSession> WhisperStreamSession::Create(const WhisperStreamOptions& options) {
  if (options.sample_rate < 1 || options.window_samples < 1 || options.interim_step_samples < 1 ||
      options.interim_step_samples > options.window_samples) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a Whisper stream needs a positive sample rate, window and interim step, the step within the window (rate ",
        options.sample_rate, ", window ", options.window_samples, " samples, step ", options.interim_step_samples,
        ")"));
  }
  return WhisperStreamSession(options);
}

void WhisperStreamSession::AddAudio(std::span<const float> samples, absl::Time now) { audio_.Add(samples, now); }

void WhisperStreamSession::EndOfAudio(absl::Time now) { audio_.End(now); }

std::optional<StreamWindow> WhisperStreamSession::NextWindow() {
  if (in_flight_ || finished_) return std::nullopt;
  const int64_t available = audio_.received() - segment_start_;
  if (available >= options_.window_samples) return StartRun(segment_start_ + options_.window_samples, true);
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
    segment_start_ = run_end_;
    audio_.DropBefore(segment_start_);
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
