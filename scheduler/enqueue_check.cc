#include "scheduler/enqueue_check.h"

#include "absl/strings/str_cat.h"

namespace sluice {

absl::Status CheckEnqueueShape(const ModelConfig& model, const InferRequest& request) {
  if (!request.on_done) return absl::InvalidArgumentError("internal: request has no on_done callback");
  if (request.inputs.size() != model.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", model.name, " takes ", model.inputs.size(),
                                                   " input(s), got ", request.inputs.size()));
  }
  for (size_t j = 0; j < model.inputs.size(); ++j) {
    const TensorSpec& spec = model.inputs[j];
    const HostTensor& tensor = request.inputs[j];
    if (tensor.dtype != spec.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' must be ", DataTypeName(spec.dtype),
                                                     ", got ", DataTypeName(tensor.dtype)));
    }
    std::vector<int64_t> want = {request.length};
    want.insert(want.end(), spec.shape.begin() + 1, spec.shape.end());
    if (tensor.shape != want) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' has shape ",
                                                     ShapeToString(tensor.shape), ", expected ",
                                                     ShapeToString(want), " for a request of length ", request.length));
    }
    const size_t expected_bytes = static_cast<size_t>(NumElements(want)) * DataTypeSize(spec.dtype);
    if (tensor.bytes.size() != expected_bytes) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "' holds ", tensor.bytes.size(),
                                                     " bytes, shape and dtype need ", expected_bytes));
    }
  }
  return absl::OkStatus();
}

}  // namespace sluice
