// The KServe v2 protobufs of the runner's own types (core/call.h): a Call as a ModelInferRequest (its index as the
// request id, its parameters as InferParameters) and back, and a ModelInferResponse as an Outcome's outputs and
// back. Only kserve/ speaks these messages; the runner never sees them.
// Thread-safety: pure functions.
#pragma once

#include <grpcpp/grpcpp.h>

#include "grpc_service.pb.h"
#include "loadtest/core/call.h"

namespace sluice::loadtest {

inference::ModelInferRequest RequestFromCall(const Call& call);
// The id is read back as the index when it is one (else kept as the Call's id).
Call CallFromRequest(const inference::ModelInferRequest& request);

// The status and, when OK, the response's outputs, each as raw bytes (typed contents packed: FP32, FP64, INT64,
// INT32, BOOL).
Outcome OutcomeFromResponse(const grpc::Status& status, const inference::ModelInferResponse& response);
void OutputsToResponse(const Outcome& outcome, inference::ModelInferResponse& response);

}  // namespace sluice::loadtest
