// One StreamingRecognize stream's recognition state, independent of gRPC: audio in (already decoded to the
// model's rate), windows out to run through the model, results back.
//
// The algorithm. Audio is cut into segments (an utterance each). Within a segment, output frames are either
// committed (decided; never recomputed) or provisional (the newest `lookahead` of the last run, which a later run
// redoes with more right context). Once per `step` of new audio one window runs:
//     [max(segment start, commit point - left_context), newest audio)     (at most the largest bucket long)
// so every window is about left_context + lookahead + step long: the same bucket for every stream, and the
// windows of many streams batch together. Its frames from the commit point on replace the provisional ones; those
// more than `lookahead` before the window's end are committed. An interim result (interim_results) carries the
// segment's transcript so far. A final result (is_final) ends the segment when its output ends in
// endpoint_silence_ms of blank frames after some speech, when the segment reaches kMaxSegmentSeconds, or when the
// stream's audio ends; the next segment starts at the newest audio. Word times count from the stream's start.
//
// Memory is bounded: audio before the next window's start is dropped, a segment keeps only its frames' log-probs
// (and at most kMaxSegmentSeconds of them), and the caller stops reading while backlog_samples() is large.
//
// The windowed StreamSession (stream_session.h), for models without a stream_step contract.
// Thread-safety: none; the caller serialises every call (the gRPC reactor holds its mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/speech_config.h"
#include "server/voice/ctc_decoder.h"
#include "server/voice/speech_model.h"
#include "server/voice/stream_audio.h"
#include "server/voice/stream_session.h"

namespace sluice::voice {

struct StreamingSessionOptions {
  int sample_rate = 16000;
  int64_t frame_samples = 640;
  int64_t max_window_samples = 0;  // the largest bucket
  int blank = 0;                   // the CTC blank's class (endpoint detection)
  StreamingSpeechOptions streaming;
  bool interim_results = false;
  // Windows start on the model's shared tick (window_ticker.h; the caller calls Tick() every step): at a tick
  // half a step of new audio starts one (a tick that comes a little early for this stream still does, and one that
  // came while a window ran counts once it is done); two steps behind (audio sent faster than real time) or after
  // the end of the audio, one starts at once.
  bool ticked = false;
};

class StreamingSession final : public StreamSession {
 public:
  static constexpr double kMaxSegmentSeconds = 120;

  // InvalidArgument when the windows cannot advance (left_context + lookahead + step must fit the largest bucket).
  static absl::StatusOr<StreamingSession> Create(const StreamingSessionOptions& options, const CtcDecoder* decoder);

  void AddAudio(std::span<const float> samples, absl::Time now) override;
  void EndOfAudio(absl::Time now) override;

  // The next window to run, when none is in flight and a step of new audio (or the end of the audio) is there.
  std::optional<StreamWindow> NextWindow() override;
  void Tick() override { tick_due_ = true; }
  // The result of the window NextWindow gave last. FailedPrecondition when none is in flight; Internal when the
  // model returned fewer frames than the window's audio needs.
  absl::StatusOr<WindowOutcome> OnWindowDone(const WindowLogProbs& log_probs, absl::Time now) override;
  // At the end of the audio with nothing left to run: the segment's final result (once), else nullopt.
  std::optional<WindowOutcome> TakeClosingResult(absl::Time now) override;

  bool finished() const override { return finished_; }
  bool window_in_flight() const { return in_flight_.has_value(); }
  // Audio received but not yet run: the caller pauses reading above a bound (flow control).
  int64_t backlog_samples() const override { return audio_.received() - processed_; }
  int64_t received_samples() const override { return audio_.received(); }

 private:
  StreamingSession(const StreamingSessionOptions& options, const CtcDecoder* decoder)
      : options_(options), decoder_(decoder) {}
  int64_t commit_sample() const;
  int64_t NextWindowStart() const;
  Transcript DecodeSegment() const;
  bool AtEndpoint() const;
  StreamResult Final();
  void StartSegment(int64_t at);

  StreamingSessionOptions options_;
  const CtcDecoder* decoder_;
  int64_t classes_ = 0;
  int64_t context_samples_ = 0;   // left context, whole frames
  int64_t lookahead_samples_ = 0;
  int64_t step_samples_ = 0;
  int64_t endpoint_frames_ = 0;

  StreamAudio audio_;             // keeps samples from the next window's start on
  int64_t processed_ = 0;         // end of the last window run
  bool finished_ = false;
  bool tick_due_ = false;  // options_.ticked: a tick came and no window has started since

  int64_t segment_start_ = 0;
  std::vector<float> committed_;    // [frames, classes] of the segment, decided
  std::vector<float> provisional_;  // [frames, classes] after the committed ones, from the last window
  std::optional<StreamWindow> in_flight_;  // its samples moved out: start, end and last only
};

}  // namespace sluice::voice
