// The Recognizer of a CTC speech model: the recording cut into bucket windows that each run as their own request
// through the model's scheduler (OfflineRecognition), their log-probs stitched and decoded by the model's CTC
// decoder. CTC models have one language and no text prompt: RecognizeOptions.language and .prompt are ignored;
// decoding is greedy, so a temperature other than 0 is refused with InvalidArgument naming the model.
// Thread-safety: immutable after construction (Recognizer's contract).
#pragma once

#include "server/voice/ctc_decoder.h"
#include "server/voice/recognizer.h"
#include "server/voice/speech_model.h"

namespace sluice::voice {

class CtcRecognizer final : public Recognizer {
 public:
  // REQUIRES: `model` and `decoder` outlive the recognizer.
  CtcRecognizer(const SpeechModel* model, const CtcDecoder* decoder) : model_(model), decoder_(decoder) {}

  const ModelConfig& config() const override { return model_->config(); }
  int sample_rate() const override { return model_->sample_rate(); }
  std::shared_ptr<RecognitionHandle> Start(std::vector<float> audio, const RecognizeOptions& options,
                                           RecognitionDone done) const override;

 private:
  const SpeechModel* const model_;
  const CtcDecoder* const decoder_;
};

}  // namespace sluice::voice
