// Translates KServe v2 / Triton protobuf messages to sluice's native types and back. No I/O, no state.
// Thread-safety: pure functions.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpc_service.pb.h"
#include "server/model_hub.h"
#include "server/request_validator.h"

namespace sluice {

struct DecodedInferRequest {
  std::vector<WireTensor> inputs;    // views into the request or into `storage`
  std::deque<std::string> storage;   // bytes converted from typed contents
  bool raw = false;                  // the client used raw_input_contents: answer with raw_output_contents
  std::vector<std::string> requested_outputs;
};

// REQUIRES: `request` outlives the result (raw inputs are views into it).
absl::StatusOr<DecodedInferRequest> DecodeInferRequest(const inference::ModelInferRequest& request);

// Triton's schedule-policy parameters: "priority" (1 = highest) and "timeout" (µs, tightens the deadline).
absl::Status ApplyInferParameters(const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
                                  absl::Time now, SubmitOptions& options);

void EncodeInferResponse(const ModelConfig& model, const inference::ModelInferRequest& request,
                         const std::vector<size_t>& selected, std::vector<HostTensor> outputs, bool raw,
                         inference::ModelInferResponse& response);

void FillModelMetadata(const ModelConfig& model, inference::ModelMetadataResponse& response);
void FillModelConfig(const ModelConfig& model, inference::ModelConfig& config);
void FillModelStatistics(const ModelConfig& model, const ModelStatsSnapshot& stats,
                         inference::ModelStatistics& out);

}  // namespace sluice
