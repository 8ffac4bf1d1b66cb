// A StreamingRecognize stream on an encoder-decoder model (Whisper), which has no frames to commit one by one: its
// runs are whole recognitions (the model's Recognizer, recognizer.h) of the current segment's audio, re-run as the
// audio grows.
//
// The algorithm. The stream is cut into segments of at most one encoder window (window_samples: Whisper's 30 s,
// the largest bucket), the same cuts Recognize makes for a long recording, so the finals joined with spaces are
// the text Recognize gives for the same audio. One run at a time:
//   - the segment holds a whole window: that window runs, and its text is the segment's final result;
//   - the audio has ended: what is left of the segment runs, final (a stream with no audio at all gets one empty
//     final);
//   - with interim_results, once interim_step_samples of new audio arrived since the last run started: the segment
//     so far runs, and its text is an interim result (stability 0: the next run may change any of it).
// So an interim's latency is the time one recognition of up to 30 s takes (its newest audio waits for the run
// before it to finish), and a final's is a recognition after the segment's last audio. No endpointing: a segment
// ends only at the window's length or the end of the audio (Whisper's output has no blank frames to find
// silence with).
//
// Memory is bounded by the caller's flow control (backlog_samples(): audio no run has started on) and by dropping
// each segment's audio once its final is given.
// Thread-safety: none; the caller serialises every call (the gRPC reactor holds its mutex).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/voice/stream_audio.h"
#include "server/voice/stream_session.h"

namespace sluice::voice {

struct WhisperStreamOptions {
  int sample_rate = 16000;
  int64_t window_samples = 480000;       // a segment's longest run: the encoder's window
  int64_t interim_step_samples = 7680;   // new audio between interim runs (speech.streaming.step_ms)
  bool interim_results = false;
};

class WhisperStreamSession final : public StreamSession {
 public:
  // InvalidArgument when a size is not positive or the step is longer than the window.
  static absl::StatusOr<WhisperStreamSession> Create(const WhisperStreamOptions& options);

  void AddAudio(std::span<const float> samples, absl::Time now) override;
  void EndOfAudio(absl::Time now) override;
  std::optional<StreamWindow> NextWindow() override;
  // FailedPrecondition: this session's runs are recognitions (OnRecognitionDone).
  absl::StatusOr<WindowOutcome> OnWindowDone(const WindowLogProbs& log_probs, absl::Time now) override;
  absl::StatusOr<WindowOutcome> OnRecognitionDone(const Recognition& recognition, absl::Time now) override;
  std::optional<WindowOutcome> TakeClosingResult(absl::Time now) override;
  // An interim run in flight once the audio has ended: the final run after it gives the text. Abandoned, it ends
  // with no result (so a final need not wait for a whole interim recognition first).
  bool RunSuperseded() const override { return in_flight_ && !run_final_ && audio_.ended(); }
  void AbandonRun() override { in_flight_ = false; }
  bool finished() const override { return finished_; }
  int64_t backlog_samples() const override { return audio_.received() - started_through_; }
  int64_t received_samples() const override { return audio_.received(); }

 private:
  explicit WhisperStreamSession(const WhisperStreamOptions& options) : options_(options) {}
  StreamWindow StartRun(int64_t end, bool final);

  WhisperStreamOptions options_;
  StreamAudio audio_;
  int64_t segment_start_ = 0;    // the current segment's first sample
  int64_t started_through_ = 0;  // the end of the newest run started
  bool in_flight_ = false;
  int64_t run_end_ = 0;          // the run in flight covers [segment_start_, run_end_)
  bool run_final_ = false;       // ... and its text is the segment's final
  int64_t finals_ = 0;
  bool finished_ = false;
};

}  // namespace sluice::voice
