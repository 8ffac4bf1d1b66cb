#include "server/voice/voice_models.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/voice/ctc_recognizer.h"
#include "server/voice/whisper_recognizer.h"

namespace sluice::voice {

absl::Status VoiceModels::EnsureBuilt() {
  MutexLock lock(&mu_);
  if (built_) return absl::OkStatus();
  if (hub_->models().empty()) {  // not published yet
    return absl::UnavailableError("the server is loading its models; retry when it is ready");
  }
  for (const std::unique_ptr<ServedModel>& served : hub_->models()) {
    if (!served->config().speech) continue;
    if (served->config().speech->recognizer == RecognizerKind::kWhisper) {
      // An encoder-decoder: its encoder is `served`, its decoder the hub's engine of the same name. It has no
      // windowed SpeechModel: StreamingRecognize refuses it naming the model.
      absl::StatusOr<std::unique_ptr<WhisperRecognizer>> whisper =
          WhisperRecognizer::Create(served.get(), hub_->SpeechDecoderOf(served->config().name));
      if (!whisper.ok()) return whisper.status();  // a model that loaded but cannot be served is the server's fault
      auto entry = std::make_unique<VoiceModel>();
      entry->recognizer = *std::move(whisper);
      models_.push_back(std::move(entry));
      continue;
    }
    absl::StatusOr<SpeechModel> model = SpeechModel::Create(served.get());
    if (!model.ok()) continue;  // not servable as speech (e.g. extra inputs): KServe v2 only
    const SpeechOptions& speech = served->config().speech.value();
    SymbolTable symbols{.symbols = speech.vocabulary, .blank = speech.blank, .word_separator = speech.word_separator};
    auto entry = std::make_unique<VoiceModel>();
    entry->model.emplace(*model);
    entry->decoder = std::make_unique<GreedyCtcDecoder>(std::move(symbols));
    // Points into the entry, which never moves (held by unique_ptr).
    entry->recognizer = std::make_unique<CtcRecognizer>(&*entry->model, entry->decoder.get());
    models_.push_back(std::move(entry));
  }
  std::sort(models_.begin(), models_.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  built_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<const VoiceModel*>> VoiceModels::All() {
  if (absl::Status built = EnsureBuilt(); !built.ok()) return built;
  MutexLock lock(&mu_);
  std::vector<const VoiceModel*> all;
  for (const auto& model : models_) all.push_back(model.get());
  return all;
}

absl::StatusOr<const VoiceModel*> VoiceModels::Find(std::string_view name) {
  if (name.empty()) return Default();
  absl::StatusOr<std::vector<const VoiceModel*>> all = All();
  if (!all.ok()) return all.status();
  std::vector<std::string> names;
  for (const VoiceModel* model : *all) {
    if (model->name() == name) return model;
    names.push_back(model->name());
  }
  const std::string listed =
      all->empty() ? "this server serves none (a speech model needs a speech: section; see README)"
                   : absl::StrCat("speech models: ", absl::StrJoin(names, ", "));
  if (absl::StatusOr<HostedModel> hosted = hub_->Lookup(name); hosted.ok() && hosted->inference != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", std::string(name), "' is served but not as speech (no speech: section in its config.yaml, or ",
        "not one FP32 audio input); ", listed));
  } else if (hosted.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", std::string(name),
                                                   "' is served but is a text-generation model, not a speech model "
                                                   "(use the OpenAI or Triton generation API); ", listed));
  }
  if (all->empty()) return absl::NotFoundError(absl::StrCat("unknown speech model '", std::string(name), "': ", listed));
  return absl::NotFoundError(absl::StrCat("unknown speech model '", std::string(name), "'; ", listed));
}

absl::StatusOr<const VoiceModel*> VoiceModels::Default() {
  if (!default_model_.empty()) return Find(default_model_);
  absl::StatusOr<std::vector<const VoiceModel*>> all = All();
  if (!all.ok()) return all.status();
  if (all->empty()) {
    return absl::NotFoundError(
        "this server serves no speech model with a speech: section (the voice API needs one; see README)");
  }
  return all->front();
}

}  // namespace sluice::voice
