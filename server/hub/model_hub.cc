#include "server/hub/model_hub.h"

#include "absl/strings/str_cat.h"

namespace sluice {

void ModelHub::Publish(std::vector<std::unique_ptr<ServedModel>> models,
                       std::vector<std::unique_ptr<GenerationModel>> generation_models,
                       std::vector<std::unique_ptr<EmbeddingModel>> embedding_models,
                       std::vector<std::unique_ptr<SpeechDecoder>> speech_decoders) {
  models_ = std::move(models);
  speech_decoders_ = std::move(speech_decoders);
  generation_models_ = std::move(generation_models);
  embedding_models_ = std::move(embedding_models);
  loaded_.store(true, std::memory_order_release);
}

std::span<const std::unique_ptr<ServedModel>> ModelHub::models() const {
  if (!loaded_.load(std::memory_order_acquire)) return {};
  return models_;
}

std::span<const std::unique_ptr<GenerationModel>> ModelHub::generation_models() const {
  if (!loaded_.load(std::memory_order_acquire)) return {};
  return generation_models_;
}

std::span<const std::unique_ptr<EmbeddingModel>> ModelHub::embedding_models() const {
  if (!loaded_.load(std::memory_order_acquire)) return {};
  return embedding_models_;
}

absl::StatusOr<HostedModel> ModelHub::Lookup(std::string_view name_view, std::string_view version_view) const {
  if (!loaded_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("the server is loading its models; not ready yet");
  }
  const std::string name(name_view), version(version_view);
  HostedModel hosted;
  for (const auto& model : models_) {
    if (model->config().name == name) hosted.inference = model.get();
  }
  for (const auto& model : generation_models_) {
    if (hosted.inference == nullptr && model->config().name == name) hosted.generation = model.get();
  }
  for (const auto& model : embedding_models_) {
    if (hosted.inference != nullptr && model->config().name == name) hosted.embedding = model.get();
  }
  if (hosted.inference == nullptr && hosted.generation == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown model '", std::string(name), "'"));
  }
  if (!version.empty() && version != "1") {
    return absl::NotFoundError(
        absl::StrCat("model '", name, "' has no version '", version, "' (sluice serves version 1)"));
  }
  return hosted;
}

absl::StatusOr<ServedModel*> ModelHub::Find(std::string_view name, std::string_view version) const {
  absl::StatusOr<HostedModel> hosted = Lookup(name, version);
  if (!hosted.ok()) return hosted.status();
  if (hosted->inference == nullptr) {
    return absl::NotFoundError(absl::StrCat("unknown model '", std::string(name), "'"));
  }
  return hosted->inference;
}

absl::StatusOr<GenerationModel*> ModelHub::FindGeneration(std::string_view name) const {
  absl::StatusOr<HostedModel> hosted = Lookup(name);
  if (!hosted.ok()) return hosted.status();
  if (hosted->generation == nullptr) {
    return absl::NotFoundError(absl::StrCat("model '", std::string(name), "' is not a text-generation model"));
  }
  return hosted->generation;
}

absl::StatusOr<EmbeddingModel*> ModelHub::FindEmbedding(std::string_view name) const {
  absl::StatusOr<HostedModel> hosted = Lookup(name);
  if (!hosted.ok()) return hosted.status();
  if (hosted->embedding == nullptr) {
    return absl::NotFoundError(absl::StrCat("model '", std::string(name),
                                            "' is not an embedding model (a kind: text model with an embedding: "
                                            "section in its config.yaml)"));
  }
  return hosted->embedding;
}

int64_t ModelHub::InFlight() const {
  int64_t total = 0;
  for (const auto& model : models()) total += model->scheduler().InFlight();
  for (const auto& model : generation_models()) total += model->engine().Waiting() + model->engine().Running();
  return total;
}

void ModelHub::StopAll() {
  for (const auto& model : embedding_models()) model->WaitForSubmitted();
  for (const auto& model : models()) model->scheduler().Stop();
  for (const auto& model : generation_models()) model->Stop();
  // After the encoders: an encoder batch finishing during Stop still hands its recordings to the decoder.
  if (loaded_.load(std::memory_order_acquire)) {
    for (const auto& decoder : speech_decoders_) decoder->engine->Stop();
  }
}

ContinuousBatcher* ModelHub::SpeechDecoderOf(std::string_view name) const {
  if (!loaded_.load(std::memory_order_acquire)) return nullptr;
  for (const auto& decoder : speech_decoders_) {
    if (decoder->config->name == name) return decoder->engine.get();
  }
  return nullptr;
}

}  // namespace sluice
