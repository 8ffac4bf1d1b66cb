#include "server/kserve/model_lookup.h"

#include "absl/strings/str_cat.h"
#include "server/llm/frontend/triton_stream_codec.h"
#include "server/kserve/model_descriptions.h"

namespace sluice {
namespace {

// The generation model a request names, when `not_batched` (the batched models' lookup) failed: the model itself,
// or `not_batched` when there is none by that name either.
absl::StatusOr<GenerationModel*> GenerationModelFor(const ModelHub& hub, std::string_view name,
                                                    std::string_view version, const absl::Status& not_batched) {
  if (!absl::IsNotFound(not_batched) || !(version.empty() || version == "1")) return not_batched;
  absl::StatusOr<GenerationModel*> model = hub.FindGeneration(name);
  return model.ok() ? model : not_batched;
}

}  // namespace

absl::Status DescribeModel(const ModelHub& hub, std::string_view name, std::string_view version,
                           inference::ModelMetadataResponse& response) {
  absl::StatusOr<ServedModel*> model = hub.Find(name, version);
  if (model.ok()) {
    FillModelMetadata((*model)->config(), response);
    return absl::OkStatus();
  }
  absl::StatusOr<GenerationModel*> generation = GenerationModelFor(hub, name, version, model.status());
  if (!generation.ok()) return generation.status();
  FillGenerationModelMetadata((*generation)->config(), response);
  return absl::OkStatus();
}

absl::Status DescribeModelConfig(const ModelHub& hub, std::string_view name, std::string_view version,
                                 inference::ModelConfig& config) {
  absl::StatusOr<ServedModel*> model = hub.Find(name, version);
  if (model.ok()) {
    FillModelConfig((*model)->config(), config);
    return absl::OkStatus();
  }
  absl::StatusOr<GenerationModel*> generation = GenerationModelFor(hub, name, version, model.status());
  if (!generation.ok()) return generation.status();
  FillGenerationModelConfig((*generation)->config(), config);
  return absl::OkStatus();
}

absl::StatusOr<bool> ModelIsReady(const ModelHub& hub, std::string_view name, std::string_view version) {
  absl::StatusOr<ServedModel*> model = hub.Find(name, version);
  if (model.ok()) return hub.ready() && (*model)->ready();
  absl::StatusOr<GenerationModel*> generation = GenerationModelFor(hub, name, version, model.status());
  if (!generation.ok()) return generation.status();
  return hub.ready() && (*generation)->ready();
}

absl::StatusOr<ServedModel*> FindInferModel(const ModelHub& hub, std::string_view name, std::string_view version) {
  absl::StatusOr<ServedModel*> model = hub.Find(name, version);
  if (model.ok() || !GenerationModelFor(hub, name, version, model.status()).ok()) return model;
  return absl::InvalidArgumentError(absl::StrCat(
      "model '", std::string(name), "' is a text-generation model: use ModelStreamInfer (decoupled streaming) or /v1/completions"));
}

}  // namespace sluice
