// Input validation, done once, at the edge, by ServedModel::Infer for every front end: decoded wire tensors
// (name, datatype, shape, raw row-major bytes) in, per-row scheduler inputs out. Every failure is
// InvalidArgument with a message naming the input and what is wrong: missing/duplicate/extra input, unknown or
// wrong datatype, shape against the declared per-sample shape, length zero or over the largest bucket, byte size
// against shape x dtype, NaN/Inf in float inputs, integers outside the input's declared `range`.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"
#include "backend/base/tensor.h"

namespace sluice {

// One input as the client sent it. `bytes` views data owned by the caller (the wire message or a buffer the
// codec filled from typed contents), little-endian and row-major.
struct WireTensor {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;  // with the leading batch dimension, as Triton clients send for batching models
  std::string_view bytes;
};

// A request split into rows: each row is one scheduler request of `length` steps.
struct ValidatedRequest {
  int64_t rows = 0;
  int64_t length = 0;
  std::vector<std::vector<HostTensor>> row_inputs;  // [row][declared input], each [length, ...fixed dims]
};

absl::StatusOr<ValidatedRequest> ValidateInputs(const ModelConfig& model, std::span<const WireTensor> inputs);

// Indices of the requested outputs in declaration order of the request; all outputs when `names` is empty.
// InvalidArgument for an unknown or repeated name.
absl::StatusOr<std::vector<size_t>> SelectOutputs(const ModelConfig& model, std::span<const std::string> names);

// The shape metadata reports for a declared tensor: a leading -1 batch dimension, then the per-sample shape.
std::vector<int64_t> BatchedShape(const TensorSpec& spec);


}  // namespace sluice
