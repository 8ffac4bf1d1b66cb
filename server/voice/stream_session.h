// What a StreamingRecognize stream's recognition state does, whichever way it runs the model: audio in (already
// decoded to the model's rate), model runs out (windows or chunks, one at a time), results back. Two kinds:
//   StreamingSession (streaming_session.h)  windows with left context and lookahead, re-run every step: any CTC
//                                           model, through the model's dynamic batcher
//   ChunkedSession (chunked_session.h)      one chunk of new audio per run, each frame computed once, for a
//                                           cache-aware model (speech.stream_step) stepped by its StreamEngine
//   WhisperStreamSession                    whole recognitions of the segment so far, re-run as audio arrives,
//     (whisper_stream_session.h)            for an encoder-decoder model (Whisper) through its Recognizer
// The gRPC reactor (riva_streaming.cc) drives either through this interface.
// Thread-safety: none; the caller serialises every call (the gRPC reactor holds its mutex).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/voice/ctc_decoder.h"
#include "server/voice/recognizer.h"
#include "server/voice/speech_model.h"

namespace sluice::voice {

// One model run the stream needs: audio samples [start, end) of the stream.
struct StreamWindow {
  std::vector<float> samples;
  int64_t start = 0;
  int64_t end = 0;
  bool last = false;  // the stream's audio has ended and this window reaches its end: everything is committed
};

struct StreamResult {
  Transcript transcript;
  bool is_final = false;
  float stability = 0;          // interim: the committed share of the segment's frames
  double audio_processed = 0;   // seconds of the stream's audio processed so far
};

struct WindowOutcome {
  std::vector<StreamResult> results;              // to send, in order (an interim, or a final)
  std::vector<absl::Duration> chunk_latencies;    // chunks this window finished: received -> now
  std::optional<absl::Duration> final_latency;    // a final: end of the segment's audio -> now
};

class StreamSession {
 public:
  virtual ~StreamSession() = default;
  virtual void AddAudio(std::span<const float> samples, absl::Time now) = 0;
  virtual void EndOfAudio(absl::Time now) = 0;
  // The next run, when none is in flight and enough new audio (or the end of the audio) is there.
  virtual std::optional<StreamWindow> NextWindow() = 0;
  // The result of the run NextWindow gave last. FailedPrecondition when none is in flight; Internal when the
  // model returned fewer frames than the run's audio needs.
  virtual absl::StatusOr<WindowOutcome> OnWindowDone(const WindowLogProbs& log_probs, absl::Time now) = 0;
  // The same for a session whose runs are recognitions (WhisperStreamSession); the others answer
  // FailedPrecondition.
  virtual absl::StatusOr<WindowOutcome> OnRecognitionDone(const Recognition& /*recognition*/, absl::Time /*now*/) {
    return absl::FailedPreconditionError("this stream's runs are model windows, not recognitions");
  }
  // The run in flight can no longer give the stream anything (e.g. an interim when the audio has ended): the caller
  // may cancel it, and then reports its cancelled end with AbandonRun instead of a result.
  virtual bool RunSuperseded() const { return false; }
  virtual void AbandonRun() {}
  // At the end of the audio with nothing left to run: the segment's final result (once), else nullopt.
  virtual std::optional<WindowOutcome> TakeClosingResult(absl::Time now) = 0;
  virtual bool finished() const = 0;
  // Audio received but not yet run: the caller pauses reading above a bound (flow control).
  virtual int64_t backlog_samples() const = 0;
  virtual int64_t received_samples() const = 0;
  // The model's shared tick came (window_ticker.h): a session that starts its runs on ticks may start one now.
  virtual void Tick() {}
};

}  // namespace sluice::voice
