// KServe v2 gRPC ModelInfer messages <-> sluice's InferCall / InferResult. No I/O, no state, no validation
// beyond the wire format itself (ServedModel::Infer validates once for every front end).
// Thread-safety: pure functions.
#pragma once

#include "absl/status/statusor.h"
#include "grpc_service.pb.h"
#include "server/core/infer_call.h"

namespace sluice {

struct GrpcInferCall {
  InferCall call;
  bool raw = false;  // the client used raw_input_contents: answer with raw_output_contents
};

// REQUIRES: `request` outlives the result (raw inputs are views into it).
absl::StatusOr<GrpcInferCall> DecodeInferRequest(const inference::ModelInferRequest& request);

// Every wire parameter as its neutral value (an unset oneof is refused, naming the key).
absl::StatusOr<InferParameters> DecodeInferParameters(
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters);

void EncodeInferResponse(const ModelConfig& model, const std::string& id, InferResult result, bool raw,
                         inference::ModelInferResponse& response);

}  // namespace sluice
