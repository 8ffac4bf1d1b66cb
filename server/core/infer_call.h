// The one decoded-request type every front end produces (KServe v2 gRPC and REST today; Riva, OpenAI and Triton
// streaming next), and the result every front end encodes. Native types only: no JSON or protobuf past here.
// Thread-safety: plain values.
#pragma once

#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/model_config.h"
#include "backend/base/tensor.h"
#include "server/core/infer_parameters.h"
#include "server/core/input_validation.h"

namespace sluice {

// Move-only: `inputs` view into `storage` (a deque keeps its elements in place when moved, not when copied).
struct InferCall {
  InferCall() = default;
  InferCall(InferCall&&) = default;
  InferCall& operator=(InferCall&&) = default;
  InferCall(const InferCall&) = delete;
  InferCall& operator=(const InferCall&) = delete;

  std::string id;                            // echoed in the answer
  std::vector<WireTensor> inputs;            // views into the wire message or into `storage`
  std::deque<std::string> storage;           // bytes a codec converted from typed/JSON data
  std::vector<std::string> requested_outputs;  // empty: every output, in declaration order
  InferParameters parameters;                // as the wire carried them; parsed once by ServedModel::Infer
  absl::Time transport_deadline = absl::InfiniteFuture();  // e.g. the gRPC deadline; `timeout` may tighten it
  // Part of a long call admitted before a drain (ServingState::Admit holds it): not refused for draining.
  bool continues_admitted = false;
};

// One requested output: its declaration and the stacked answer [rows, ...].
struct InferOutput {
  const TensorSpec* spec = nullptr;
  HostTensor tensor;
};

struct InferResult {
  std::vector<InferOutput> outputs;  // the requested outputs, in request order
  InferOptions options;              // as parsed (encoders read binary_data_output)
};

// Called exactly once per ServedModel::Infer call: on the caller's thread when the request is refused before it
// was queued (or cancelled while still queued by a Cancel on the caller's thread), otherwise on a scheduler
// thread. It must not block: encode and hand the answer to the transport.
using InferCompletion = std::function<void(absl::StatusOr<InferResult>)>;

}  // namespace sluice
