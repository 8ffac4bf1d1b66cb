#include "server/kserve/model_lookup.h"

#include "absl/strings/str_cat.h"
#include "server/llm/frontend/triton_stream_codec.h"
#include "server/kserve/model_descriptions.h"

namespace sluice {

absl::Status DescribeModel(const ModelHub& hub, std::string_view name, std::string_view version,
                           inference::ModelMetadataResponse& response) {
  absl::StatusOr<HostedModel> model = hub.Lookup(name, version);
  if (!model.ok()) return model.status();
  if (model->inference != nullptr) {
    FillModelMetadata(model->inference->config(), response);
  } else {
    FillGenerationModelMetadata(model->generation->config(), response);
  }
  return absl::OkStatus();
}

absl::Status DescribeModelConfig(const ModelHub& hub, std::string_view name, std::string_view version,
                                 inference::ModelConfig& config) {
  absl::StatusOr<HostedModel> model = hub.Lookup(name, version);
  if (!model.ok()) return model.status();
  if (model->inference != nullptr) {
    FillModelConfig(model->inference->config(), config);
  } else {
    FillGenerationModelConfig(model->generation->config(), config);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> ModelIsReady(const ModelHub& hub, std::string_view name, std::string_view version) {
  absl::StatusOr<HostedModel> model = hub.Lookup(name, version);
  if (!model.ok()) return model.status();
  return hub.ready() && (model->inference != nullptr ? model->inference->ready() : model->generation->ready());
}

absl::StatusOr<ServedModel*> FindInferModel(const ModelHub& hub, std::string_view name, std::string_view version) {
  absl::StatusOr<HostedModel> model = hub.Lookup(name, version);
  if (!model.ok()) return model.status();
  if (model->inference != nullptr) return model->inference;
  return absl::InvalidArgumentError(absl::StrCat(
      "model '", std::string(name), "' is a text-generation model: use ModelStreamInfer (decoupled streaming) or /v1/completions"));
}

}  // namespace sluice
