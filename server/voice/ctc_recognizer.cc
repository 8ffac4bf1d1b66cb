#include "server/voice/ctc_recognizer.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/voice/offline_recognition.h"

namespace sluice::voice {
namespace {

// Answers a refusal made before anything was queued: Cancel has nothing to withdraw.
class AnsweredHandle final : public RecognitionHandle {
 public:
  void Cancel() override {}
};

// A CTC model's output has no segment structure of its own: the whole recording is one segment, from its first
// word to its last (or the whole recording when the words carry no times).
std::vector<TranscriptSegment> WholeRecordingSegment(const Transcript& transcript, double audio_seconds) {
  if (transcript.text.empty()) return {};
  TranscriptSegment segment{.start_ms = 0, .end_ms = static_cast<int64_t>(audio_seconds * 1000.0 + 0.5),
                            .text = transcript.text};
  if (!transcript.words.empty()) {
    segment.start_ms = transcript.words.front().start_ms;
    segment.end_ms = transcript.words.back().end_ms;
  }
  return {segment};
}

}  // namespace

std::shared_ptr<RecognitionHandle> CtcRecognizer::Start(std::vector<float> audio, const RecognizeOptions& options,
                                                        RecognitionDone done) const {
  if (options.temperature != 0) {
    done(absl::InvalidArgumentError(absl::StrCat("model '", model_->name(), "' decodes greedily (CTC best path): ",
                                                 "temperature must be 0, got ", options.temperature)));
    return std::make_shared<AnsweredHandle>();
  }
  return OfflineRecognition::Start(
      model_, decoder_, std::move(audio), options.deadline,
      [done = std::move(done)](absl::StatusOr<OfflineResult> result) {
        if (!result.ok()) return done(result.status());
        Recognition recognition;
        recognition.transcript = std::move(result->transcript);
        recognition.word_times = true;
        recognition.audio_seconds = result->audio_seconds;
        recognition.model_runs = result->windows;
        recognition.segments = WholeRecordingSegment(recognition.transcript, recognition.audio_seconds);
        done(std::move(recognition));
      });
}

}  // namespace sluice::voice
