#include "server/core/input_validation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace sluice {
namespace {

std::string ShapeText(std::span<const int64_t> shape) { return absl::StrCat("[", absl::StrJoin(shape, ","), "]"); }

template <typename T>
absl::Status CheckRange(const TensorSpec& spec, std::string_view bytes) {
  const ValueRange& range = *spec.value_range;
  const size_t count = bytes.size() / sizeof(T);
  for (size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, bytes.data() + i * sizeof(T), sizeof(T));
    if (value < range.min || value > range.max) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': element ", i, " is ", value,
                                                     ", outside the model's range [", range.min, ", ",
                                                     range.max, "]"));
    }
  }
  return absl::OkStatus();
}

// Value checks the graph cannot be trusted with: NaN/Inf floats, integers outside the declared range.
absl::Status CheckValues(const TensorSpec& spec, std::string_view bytes) {
  if (spec.value_range && spec.dtype == DataType::kInt64) return CheckRange<int64_t>(spec, bytes);
  if (spec.value_range && spec.dtype == DataType::kInt32) return CheckRange<int32_t>(spec, bytes);
  if (spec.dtype != DataType::kFp32) return absl::OkStatus();
  const size_t count = bytes.size() / sizeof(float);
  for (size_t i = 0; i < count; ++i) {
    float value;
    std::memcpy(&value, bytes.data() + i * sizeof(float), sizeof(float));
    if (!std::isfinite(value)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': element ", i, " is ",
                                                     std::isnan(value) ? "NaN" : "Inf",
                                                     "; only finite values are accepted"));
    }
  }
  return absl::OkStatus();
}

// The Open Inference Protocol's tensor datatypes (sluice serves a subset; the rest are named as mismatches).
bool IsKserveDatatype(std::string_view datatype) {
  for (std::string_view known : {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
                                 "FP16", "FP32", "FP64", "BYTES", "BF16"}) {
    if (datatype == known) return true;
  }
  return false;
}

// Checks one wire tensor against its declaration; returns its (rows, length).
absl::StatusOr<std::pair<int64_t, int64_t>> CheckTensor(const ModelConfig& model, const TensorSpec& spec,
                                                        const WireTensor& tensor) {
  if (!IsKserveDatatype(tensor.datatype)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': unknown datatype '", tensor.datatype,
                                                   "' (the model takes ", DataTypeName(spec.dtype), ")"));
  }
  if (tensor.datatype != DataTypeName(spec.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': datatype ", tensor.datatype,
                                                   " does not match the model's ", DataTypeName(spec.dtype)));
  }
  const std::vector<int64_t> expected = BatchedShape(spec);
  bool matches = tensor.shape.size() == expected.size();
  for (size_t i = 0; matches && i < expected.size(); ++i) {
    matches = tensor.shape[i] >= 0 && (expected[i] == kVariableDim || expected[i] == tensor.shape[i]);
  }
  if (!matches) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': shape ", ShapeText(tensor.shape),
                                                   " does not match the model's ", ShapeText(expected),
                                                   " (batch dimension first, -1 = any size)"));
  }
  const int64_t rows = tensor.shape[0];
  const int64_t length = spec.has_variable_axis() ? tensor.shape[1] : 1;
  if (rows == 0) return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': batch dimension is 0"));
  if (rows > model.max_batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': ", rows,
                                                   " rows exceed the model's max batch size ",
                                                   model.max_batch_size()));
  }
  if (spec.has_variable_axis() && length == 0) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': length 0; at least 1 step is needed"));
  }
  if (length > model.max_length()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': length ", length,
                                                   " exceeds the largest bucket ", model.max_length()));
  }
  const int64_t want_bytes = NumElements(tensor.shape) * static_cast<int64_t>(DataTypeSize(spec.dtype));
  if (static_cast<int64_t>(tensor.bytes.size()) != want_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': ", tensor.bytes.size(),
                                                   " bytes of data, but shape ", ShapeText(tensor.shape), " of ",
                                                   tensor.datatype, " needs ", want_bytes, " bytes"));
  }
  if (auto status = CheckValues(spec, tensor.bytes); !status.ok()) return status;
  return std::pair{rows, length};
}

}  // namespace

std::vector<int64_t> BatchedShape(const TensorSpec& spec) {
  std::vector<int64_t> shape{-1};
  shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
  return shape;
}

absl::StatusOr<ValidatedRequest> ValidateInputs(const ModelConfig& model, std::span<const WireTensor> inputs) {
  std::vector<const WireTensor*> by_spec(model.inputs.size(), nullptr);
  for (const WireTensor& tensor : inputs) {
    size_t index = 0;
    while (index < model.inputs.size() && model.inputs[index].name != tensor.name) ++index;
    if (index == model.inputs.size()) {
      std::vector<std::string> names;
      for (const TensorSpec& spec : model.inputs) names.push_back(spec.name);
      return absl::InvalidArgumentError(absl::StrCat("unexpected input '", tensor.name, "' for model '",
                                                     model.name, "' (inputs: ", absl::StrJoin(names, ", "), ")"));
    }
    if (by_spec[index] != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("duplicate input '", tensor.name, "'"));
    }
    by_spec[index] = &tensor;
  }
  ValidatedRequest request;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const TensorSpec& spec = model.inputs[i];
    if (by_spec[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", spec.name, "' for model '", model.name, "'"));
    }
    absl::StatusOr<std::pair<int64_t, int64_t>> extent = CheckTensor(model, spec, *by_spec[i]);
    if (!extent.ok()) return extent.status();
    if (i > 0 && (extent->first != request.rows || extent->second != request.length)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", spec.name, "': shape ",
                                                     ShapeText(by_spec[i]->shape),
                                                     " disagrees with the other inputs' rows/length"));
    }
    std::tie(request.rows, request.length) = *extent;
  }
  request.row_inputs.resize(request.rows);
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    const WireTensor& tensor = *by_spec[i];
    std::vector<int64_t> row_shape(tensor.shape.begin() + 1, tensor.shape.end());
    const size_t row_bytes = tensor.bytes.size() / request.rows;
    for (int64_t r = 0; r < request.rows; ++r) {
      HostTensor row{model.inputs[i].dtype, row_shape, std::vector<std::byte>(row_bytes)};
      std::memcpy(row.bytes.data(), tensor.bytes.data() + r * row_bytes, row_bytes);
      request.row_inputs[r].push_back(std::move(row));
    }
  }
  return request;
}

absl::StatusOr<std::vector<size_t>> SelectOutputs(const ModelConfig& model, std::span<const std::string> names) {
  std::vector<size_t> selected;
  if (names.empty()) {
    for (size_t i = 0; i < model.outputs.size(); ++i) selected.push_back(i);
    return selected;
  }
  for (const std::string& name : names) {
    size_t index = 0;
    while (index < model.outputs.size() && model.outputs[index].name != name) ++index;
    if (index == model.outputs.size()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown output '", name, "' for model '", model.name, "'"));
    }
    if (std::find(selected.begin(), selected.end(), index) != selected.end()) {
      return absl::InvalidArgumentError(absl::StrCat("output '", name, "' requested twice"));
    }
    selected.push_back(index);
  }
  return selected;
}

}  // namespace sluice
