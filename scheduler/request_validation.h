// Checks an InferRequest against its model before it is queued: one tensor per declared input, each of the
// declared dtype and shape [length, ...], byte sizes that match, finite float values. Shared by every front
// end through Scheduler::Enqueue, so both transports give the same messages.
// Thread-safety: pure function.
#pragma once

#include "absl/status/status.h"
#include "backend/model_config.h"
#include "scheduler/infer_request.h"

namespace sluice {

// InvalidArgument naming the input and what is wrong; OK when the request may be queued.
absl::Status ValidateInferRequest(const ModelConfig& model, const InferRequest& request);

}  // namespace sluice
