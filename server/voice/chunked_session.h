// The StreamSession (stream_session.h) of a cache-aware streaming model: the audio is cut into chunks of
// chunk_samples from the stream's first sample (whatever sizes the client sends), and each chunk runs once, in
// order, through the model's StreamEngine; the model keeps the stream's context in its slot, so every output frame
// is final as it comes (no lookahead, nothing recomputed). The last chunk may be short.
//
// Segments and endpoints: a segment's frames are decided as they come; a final result (is_final) ends the segment
// when its output shows speech followed by an endpoint, at kMaxSegmentSeconds, or at the end of the audio; the
// model's state is not reset there (the stream is one utterance to the model, cut into results). Endpointing from
// the output, with Riva's EndpointingConfig fields (ms are rounded to whole frames):
//   speech starts  once start_history ms of frames hold at least start_threshold of non-blank frames
//                  (default: one frame, threshold 1: the first non-blank frame)
//   endpoint       after speech, the last stop_history ms of frames hold at least stop_threshold of blank frames
//                  (default: the model's streaming.endpoint_silence_ms, threshold 1: all blank)
//   stop_history_eou / stop_threshold_eou (end-of-utterance early finals) are not supported and ignored.
// Interim results (interim_results) carry the segment's transcript so far; stability is the share of its frames
// up to the last blank frame (the text before it cannot change; the word after it may still grow).
//
// Thread-safety: none; the caller serialises every call (the gRPC reactor holds its mutex).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/voice/ctc_decoder.h"
#include "server/voice/stream_audio.h"
#include "server/voice/stream_session.h"

namespace sluice::voice {

struct EndpointOptions {
  int start_history_ms = 0;  // 0: one frame
  float start_threshold = 1.0f;
  int stop_history_ms = 800;
  float stop_threshold = 1.0f;
};

struct ChunkedSessionOptions {
  int sample_rate = 16000;
  int64_t frame_samples = 640;
  int64_t chunk_samples = 2560;
  int blank = 0;
  EndpointOptions endpoint;
  bool interim_results = false;
};

class ChunkedSession final : public StreamSession {
 public:
  static constexpr double kMaxSegmentSeconds = 120;

  // InvalidArgument for a chunk that is not whole frames, or endpoint fields out of range (thresholds in [0, 1],
  // histories in [0, 60000] ms).
  static absl::StatusOr<ChunkedSession> Create(const ChunkedSessionOptions& options, const CtcDecoder* decoder);

  void AddAudio(std::span<const float> samples, absl::Time now) override;
  void EndOfAudio(absl::Time now) override;
  // The next chunk: [processed, processed + chunk_samples), or the short rest once the audio has ended. start == 0
  // marks the stream's first chunk (the engine resets the slot's state).
  std::optional<StreamWindow> NextWindow() override;
  absl::StatusOr<WindowOutcome> OnWindowDone(const WindowLogProbs& log_probs, absl::Time now) override;
  std::optional<WindowOutcome> TakeClosingResult(absl::Time now) override;
  bool finished() const override { return finished_; }
  int64_t backlog_samples() const override { return audio_.received() - processed_; }
  int64_t received_samples() const override { return audio_.received(); }

 private:
  ChunkedSession(const ChunkedSessionOptions& options, const CtcDecoder* decoder)
      : options_(options), decoder_(decoder) {}
  Transcript DecodeSegment() const;
  void UpdateSpeechStart(int64_t from_frame);
  bool AtEndpoint() const;
  StreamResult Final();
  void StartSegment();

  ChunkedSessionOptions options_;
  const CtcDecoder* decoder_;
  int64_t start_frames_ = 1;
  int64_t stop_frames_ = 1;
  int64_t classes_ = 0;

  StreamAudio audio_;        // keeps samples from processed_ on
  int64_t processed_ = 0;    // end of the last chunk run
  bool in_flight_ = false;
  int64_t in_flight_end_ = 0;
  bool in_flight_last_ = false;
  bool finished_ = false;

  int64_t segment_start_ = 0;   // sample
  std::vector<float> frames_;   // [frames, classes] of the segment
  std::vector<bool> blank_;     // by segment frame: its best class is the blank
  bool speech_started_ = false;
};

}  // namespace sluice::voice
