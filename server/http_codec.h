// KServe v2 REST bodies <-> native types: JSON tensors (RapidJSON) and the binary-data extension
// (Inference-Header-Content-Length + per-tensor binary_data_size). No I/O, no state.
// Thread-safety: pure functions.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model_hub.h"
#include "server/request_validator.h"

namespace sluice {

struct HttpInferRequest {
  std::string id;
  std::vector<WireTensor> inputs;    // views into the body or `storage`
  std::deque<std::string> storage;   // bytes converted from JSON data
  std::vector<std::string> requested_outputs;
  std::vector<bool> binary_output;   // per requested output (all outputs when none requested)
  bool binary_default = false;       // request parameter binary_data_output
  SubmitOptions options;
};

// `header_length`: the Inference-Header-Content-Length value when present. REQUIRES: `body` outlives the result.
absl::StatusOr<HttpInferRequest> DecodeHttpInfer(const std::string& body, std::optional<size_t> header_length,
                                                 absl::Time now);

struct HttpBody {
  std::string body;
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON header
};

HttpBody EncodeHttpInfer(const ModelConfig& model, const HttpInferRequest& request,
                         const std::vector<size_t>& selected, const std::vector<HostTensor>& outputs);

std::string ErrorJson(const std::string& message);
std::string ModelMetadataJson(const ModelConfig& model);
std::string ModelConfigJson(const ModelConfig& model);
std::string ModelStatsJson(const std::vector<std::pair<const ModelConfig*, ModelStatsSnapshot>>& models);

}  // namespace sluice
