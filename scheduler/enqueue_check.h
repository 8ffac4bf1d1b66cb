// The scheduler's own precondition on an InferRequest before it is queued: one tensor per declared input, each
// of the declared dtype and shape [length, ...], byte sizes that match. O(inputs), never scans the values:
// client input is validated once, at the edge (server/core/input_validation.h, which also rejects NaN/Inf); this
// only keeps a caller's bug from reaching a graph with a wrong shape.
// Thread-safety: pure function.
#pragma once

#include "absl/status/status.h"
#include "backend/base/model_config.h"
#include "scheduler/infer_request.h"

namespace sluice {

// InvalidArgument naming the input and what is wrong; OK when the request may be queued.
absl::Status CheckEnqueueShape(const ModelConfig& model, const InferRequest& request);

}  // namespace sluice
