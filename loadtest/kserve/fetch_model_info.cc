#include "loadtest/kserve/fetch_model_info.h"

#include <chrono>
#include <optional>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/base/model_config.h"

namespace sluice::loadtest {
namespace {

absl::Status RpcError(const std::string& what, const grpc::Status& status) {
  return absl::UnavailableError(absl::StrCat(what, ": ", status.error_message(), " (gRPC code ",
                                             static_cast<int>(status.error_code()), ")"));
}

}  // namespace

absl::StatusOr<ModelInfo> FetchModelInfo(InferClient& client, const std::string& model,
                                         const std::string& model_repository, int64_t max_length_override) {
  ModelInfo info;
  info.name = model;

  inference::ModelMetadataResponse metadata;
  if (grpc::Status s = client.ModelMetadata(model, &metadata); !s.ok()) {
    return RpcError(absl::StrCat("ModelMetadata(", model, ")"), s);
  }
  if (metadata.inputs_size() != 1) {
    return absl::UnimplementedError(absl::StrCat("model ", model, " has ", metadata.inputs_size(),
                                                 " inputs; the load generator drives single-input models"));
  }
  const auto& input = metadata.inputs(0);
  info.input_name = input.name();
  info.datatype = input.datatype();
  // Batched shape as Triton reports it: [-1 (batch), -1 (variable axis), fixed dims...].
  if (input.shape_size() < 2 || input.shape(1) != -1) {
    return absl::UnimplementedError(absl::StrCat("model ", model, " input ", input.name(),
                                                 " has no variable axis after the batch dimension"));
  }
  for (int i = 2; i < input.shape_size(); ++i) {
    if (input.shape(i) < 1) {
      return absl::UnimplementedError(
          absl::StrCat("model ", model, " input ", input.name(), " has a second variable axis"));
    }
    info.fixed_dims.push_back(input.shape(i));
    info.elements_per_step *= input.shape(i);
  }
  for (const auto& output : metadata.outputs()) info.output_names.push_back(output.name());

  inference::ModelConfigResponse config;
  bool kind_known = false;
  if (grpc::Status s = client.ModelConfig(model, &config); s.ok()) {
    const auto& params = config.config().parameters();
    if (auto it = params.find("kind"); it != params.end()) {
      info.kind = it->second.string_value();
      kind_known = true;
    }
    if (auto it = params.find("bucket_lengths"); it != params.end()) {
      for (absl::string_view part : absl::StrSplit(it->second.string_value(), ',', absl::SkipEmpty())) {
        int64_t length = 0;
        if (absl::SimpleAtoi(part, &length)) info.bucket_lengths.push_back(length);
      }
    }
    if (auto it = params.find("sample_rate"); it != params.end()) {
      int rate = 0;
      if (absl::SimpleAtoi(it->second.string_value(), &rate) && rate > 0) info.sample_rate = rate;
    }
  }
  // The local config: a fallback for kind, buckets and (from servers that do not advertise it) the sample rate.
  std::optional<absl::StatusOr<ModelConfig>> loaded;
  if (!model_repository.empty()) {
    loaded = LoadModelConfig((std::filesystem::path(model_repository) / model).string());
  }
  const ModelConfig* local = loaded && loaded->ok() ? &**loaded : nullptr;
  if (local && !kind_known) info.kind = ModelKindName(local->kind);
  if (loaded && !loaded->ok() && info.is_speech() && info.sample_rate == 0) return loaded->status();
  if (local && info.bucket_lengths.empty()) info.bucket_lengths = local->buckets.lengths;
  if (!info.bucket_lengths.empty()) info.max_length = info.bucket_lengths.back();
  if (max_length_override > 0) info.max_length = max_length_override;
  if (info.max_length <= 0) {
    return absl::FailedPreconditionError(
        "the server reports no bucket lengths; pass --max-length or --model-repository");
  }

  if (info.is_speech()) {
    if (local && info.sample_rate == 0) {
      for (const TensorSpec& spec : local->inputs) {
        if (spec.name == info.input_name && spec.sample_rate) info.sample_rate = *spec.sample_rate;
      }
    }
    if (info.sample_rate == 0) {
      info.sample_rate = 16000;
      info.sample_rate_assumed = true;
    }
  }
  return info;
}

}  // namespace sluice::loadtest
