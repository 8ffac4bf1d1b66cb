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
// before it to finish), and a final's is a recognition after the segment's last audio.
//
// Endpointing (opt-in: endpoint_silence_samples > 0; the reactor sets it from Riva's EndpointingConfig): Whisper's
// output has no blank frames to find silence with, so the audio's energy does. Each vad_frame_samples frame is
// speech when its RMS reaches speech_rms; once the segment has had endpoint_min_speech_samples of speech and then
// endpoint_silence_samples of non-speech, the segment ends in the middle of that silence: the audio before the cut
// runs as the segment's final, and the next segment starts at the cut (it needs speech of its own before it can
// end the same way). Without it a segment ends only at the window's length or the end of the audio.
//
// Memory is bounded by the caller's flow control (backlog_samples(): audio no run has started on) and by dropping
// each segment's audio once its final is given.
// Thread-safety: none; the caller serialises every call (the gRPC reactor holds its mutex).
#pragma once

#include <cstdint>
#include <deque>
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
  int64_t endpoint_silence_samples = 0;     // 0: no endpointing
  int64_t endpoint_min_speech_samples = 0;  // speech a segment needs before silence can end it (0: one frame)
  int64_t vad_frame_samples = 320;          // 20 ms at 16 kHz
  float speech_rms = 0.01f;                 // about -40 dBFS
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
  bool RunSuperseded() const override { return in_flight_ && !run_final_ && (audio_.ended() || !cuts_.empty()); }
  void AbandonRun() override { in_flight_ = false; }
  bool finished() const override { return finished_; }
  int64_t backlog_samples() const override { return audio_.received() - started_through_; }
  int64_t received_samples() const override { return audio_.received(); }

 private:
  explicit WhisperStreamSession(const WhisperStreamOptions& options) : options_(options) {}
  StreamWindow StartRun(int64_t end, bool final);
  void Scan(std::span<const float> samples);  // endpointing: classifies frames, queues cuts
  void NewSegment(int64_t start);

  WhisperStreamOptions options_;
  StreamAudio audio_;
  int64_t segment_start_ = 0;    // the current segment's first sample
  int64_t started_through_ = 0;  // the end of the newest run started
  bool in_flight_ = false;
  int64_t run_end_ = 0;          // the run in flight covers [segment_start_, run_end_)
  bool run_final_ = false;       // ... and its text is the segment's final
  int64_t finals_ = 0;
  bool finished_ = false;
  // Endpointing: the frame being summed, the segment's speech so far, where the current run of non-speech frames
  // began (-1: the last frame was speech), and the cuts found, oldest first.
  double frame_energy_ = 0;
  int64_t frame_fill_ = 0;
  int64_t frames_end_ = 0;  // the end of the last classified frame
  int64_t speech_samples_ = 0;
  int64_t silence_start_ = -1;
  std::deque<int64_t> cuts_;
};

}  // namespace sluice::voice
