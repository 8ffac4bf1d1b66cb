// Recognizer: the seam between the whole-recording voice front ends (Riva Recognize, OpenAI
// /v1/audio/transcriptions) and a model family. A CTC model's recognizer cuts the audio into bucket windows and
// decodes their log-probs (ctc_recognizer.h); an encoder-decoder model (Whisper) runs its own engine behind the same
// call. The front ends decode the audio bytes, hold the call's admission, and format the answer; the recognizer
// owns everything between samples and text.
//
// Thread-safety: a Recognizer is immutable after construction; Start may be called from any thread at once.
// `done` is called exactly once per Start: on the calling thread (a refusal before anything was queued) or on a
// scheduler/engine thread; it must not block. RecognitionHandle::Cancel may be called from any thread, any number
// of times, before or after `done` (after, it does nothing).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/model_config.h"
#include "server/voice/ctc_decoder.h"

namespace sluice::voice {

struct RecognizeOptions {
  // ISO-639-1 code ("en"), or a BCP-47 tag whose primary subtag is one ("en-US"). Empty: the model's default
  // (a model that detects languages detects it). A model that cannot give the language: InvalidArgument naming it.
  std::string language;
  // Text that precedes the audio (OpenAI's `prompt`: spelling, style). Models without a text prompt ignore it.
  std::string prompt;
  // Sampling temperature; 0 is greedy. A model that only decodes greedily refuses > 0 with InvalidArgument.
  float temperature = 0;
  absl::Time deadline = absl::InfiniteFuture();
};

// A stretch of the transcript with its audio times (a Whisper segment; a CTC model's whole window text).
struct TranscriptSegment {
  int64_t start_ms = 0;
  int64_t end_ms = 0;
  std::string text;
};

struct Recognition {
  Transcript transcript;                   // text, confidence, and words with times when word_times is set
  bool word_times = false;                 // transcript.words carry real per-word times
  std::vector<TranscriptSegment> segments;  // in time order, covering the text; empty when the text is empty
  std::string language;                    // the language decoded ("" when the model has no notion of one)
  double audio_seconds = 0;                // the recording's length
  int64_t model_runs = 0;                  // executions this recording took (windows, encoder + decoder steps)
};

using RecognitionDone = std::function<void(absl::StatusOr<Recognition>)>;

class RecognitionHandle {
 public:
  virtual ~RecognitionHandle() = default;
  // Withdraws what is still queued and answers Cancelled (unless the answer was already given).
  virtual void Cancel() = 0;
};

class Recognizer {
 public:
  virtual ~Recognizer() = default;

  // The served model's config (its name, `speech:` section, cost): for names, limits and voice metrics.
  virtual const ModelConfig& config() const = 0;
  // Samples per second the recognizer takes (the front ends resample to it).
  virtual int sample_rate() const = 0;

  // REQUIRES: `audio` is mono at sample_rate(), non-empty, at most config().speech->max_audio_seconds long; the
  // caller has admitted the call (the hub's ServingState::Admit) and holds the admission until `done`.
  virtual std::shared_ptr<RecognitionHandle> Start(std::vector<float> audio, const RecognizeOptions& options,
                                                   RecognitionDone done) const = 0;
};

}  // namespace sluice::voice
