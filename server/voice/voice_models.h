// The speech models the voice API serves: every published model with a `speech:` section, each with its
// Recognizer (recognizer.h; a CTC model's also with its CTC decoder for streaming). Built once, on the first lookup after the hub has published its models (the server listens before
// its models load; until then every lookup answers Unavailable, as the hub does).
//
// Model choice (RecognitionConfig.model): a name picks that model (NotFound naming the served speech models, or
// InvalidArgument when the named model is served but is not a speech model: no speech section, or a generation
// model); an empty name picks the default — the server config's voice.default_model, else the speech model first
// in name order.
//
// Thread-safety: every method may be called from any thread; entries never move or change once built.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "backend/base/sync.h"
#include "server/hub/model_hub.h"
#include "server/voice/ctc_decoder.h"
#include "server/voice/recognizer.h"
#include "server/voice/speech_model.h"

namespace sluice::voice {

struct VoiceModel {
  const ModelConfig& config() const { return recognizer->config(); }
  const std::string& name() const { return recognizer->config().name; }

  // Every voice model has one: whole recordings (Riva Recognize, OpenAI transcriptions).
  std::unique_ptr<Recognizer> recognizer;
  // CTC models: the speech model and decoder StreamingRecognize's windows run through (and the recognizer points
  // at). Unset for a model that cannot stream windows; StreamingRecognize refuses it naming the model.
  std::optional<SpeechModel> model;
  std::unique_ptr<CtcDecoder> decoder;
};

class VoiceModels {
 public:
  // `default_model` empty: the first speech model in name order.
  explicit VoiceModels(ModelHub* hub, std::string default_model = "")
      : hub_(hub), default_model_(std::move(default_model)) {}

  absl::StatusOr<const VoiceModel*> Find(std::string_view name);
  // Every voice model, in name order. Unavailable while the server loads.
  absl::StatusOr<std::vector<const VoiceModel*>> All();
  // The model an empty name picks; the errors Find gives for the configured default's name (NotFound when the
  // server serves no speech model at all).
  absl::StatusOr<const VoiceModel*> Default();

 private:
  absl::Status EnsureBuilt();

  ModelHub* const hub_;
  const std::string default_model_;
  Mutex mu_;
  bool built_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::unique_ptr<VoiceModel>> models_ ABSL_GUARDED_BY(mu_);  // sorted by name
};

}  // namespace sluice::voice
