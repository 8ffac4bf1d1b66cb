// The string parameters sluice advertises in a model's config (Triton's ModelConfig.parameters) over gRPC and
// HTTP alike, so clients (sluice-loadtest, tritonclient users) learn the model's kind, its compiled length
// buckets and, for speech models, the audio sample rate without reading config.yaml.
// Thread-safety: pure function.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/base/model_config.h"

namespace sluice {

inline std::vector<std::pair<std::string, std::string>> ModelConfigParameters(const ModelConfig& model) {
  std::string lengths;
  for (int64_t l : model.buckets.lengths) absl::StrAppend(&lengths, lengths.empty() ? "" : ",", l);
  std::vector<std::pair<std::string, std::string>> parameters = {{"bucket_lengths", lengths},
                                                                 {"kind", ModelKindName(model.kind)}};
  if (model.inputs.front().sample_rate) {
    parameters.emplace_back("sample_rate", std::to_string(*model.inputs.front().sample_rate));
  }
  return parameters;
}

}  // namespace sluice
