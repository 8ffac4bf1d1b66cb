#include "loadtest/kserve/output_compare.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {
namespace {

template <typename T>
std::vector<double> FromBytes(const std::string& bytes) {
  std::vector<double> out(bytes.size() / sizeof(T));
  for (size_t i = 0; i < out.size(); ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out[i] = static_cast<double>(v);
  }
  return out;
}

}  // namespace

absl::StatusOr<DecodedOutput> DecodeOutput(const inference::ModelInferResponse& response, const std::string& name) {
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& output = response.outputs(i);
    if (output.name() != name) continue;
    DecodedOutput decoded;
    decoded.shape.assign(output.shape().begin(), output.shape().end());
    const std::string& dtype = output.datatype();
    if (i < response.raw_output_contents_size()) {
      const std::string& raw = response.raw_output_contents(i);
      if (dtype == "FP32") decoded.values = FromBytes<float>(raw);
      else if (dtype == "INT64") decoded.values = FromBytes<int64_t>(raw);
      else if (dtype == "INT32") decoded.values = FromBytes<int32_t>(raw);
      else if (dtype == "BOOL") decoded.values = FromBytes<uint8_t>(raw);
      else return absl::UnimplementedError(absl::StrCat("output ", name, ": datatype ", dtype, " is not decoded"));
    } else {
      const auto& c = output.contents();
      if (dtype == "FP32") decoded.values.assign(c.fp32_contents().begin(), c.fp32_contents().end());
      else if (dtype == "INT64") decoded.values.assign(c.int64_contents().begin(), c.int64_contents().end());
      else if (dtype == "INT32") decoded.values.assign(c.int_contents().begin(), c.int_contents().end());
      else if (dtype == "BOOL") decoded.values.assign(c.bool_contents().begin(), c.bool_contents().end());
      else return absl::UnimplementedError(absl::StrCat("output ", name, ": datatype ", dtype, " is not decoded"));
    }
    return decoded;
  }
  return absl::NotFoundError(absl::StrCat("the response has no output '", name, "'"));
}

absl::StatusOr<std::vector<double>> ToDoubles(const HostTensor& tensor) {
  std::vector<double> out;
  out.reserve(tensor.num_elements());
  switch (tensor.dtype) {
    case DataType::kFp32: for (float v : tensor.values<float>()) out.push_back(v); break;
    case DataType::kInt64: for (int64_t v : tensor.values<int64_t>()) out.push_back(static_cast<double>(v)); break;
    case DataType::kInt32: for (int32_t v : tensor.values<int32_t>()) out.push_back(v); break;
    case DataType::kBool: for (uint8_t v : tensor.values<uint8_t>()) out.push_back(v); break;
    case DataType::kFp16: return absl::UnimplementedError("FP16 reference tensors are not compared");
  }
  return out;
}

TensorComparison CompareTensor(const std::vector<int64_t>& got_shape, const std::vector<double>& got,
                               const std::vector<int64_t>& expected_shape, const std::vector<double>& expected,
                               double tolerance) {
  TensorComparison c;
  std::vector<int64_t> shape = got_shape;
  if (shape.size() == expected_shape.size() + 1 && !shape.empty() && shape.front() == 1) shape.erase(shape.begin());
  c.elements = static_cast<int64_t>(expected.size());
  c.shape_matches = shape == expected_shape && got.size() == expected.size();
  if (!c.shape_matches) {
    c.mismatched = std::max<int64_t>(c.elements, 1);
    c.max_abs_error = std::numeric_limits<double>::infinity();
    return c;
  }
  double magnitude = 1;
  for (double v : expected) magnitude = std::max(magnitude, std::abs(v));
  c.allowed_error = tolerance * magnitude;
  for (size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(got[i] - expected[i]);
    if (std::isnan(error)) {
      ++c.mismatched;
      c.max_abs_error = std::numeric_limits<double>::infinity();
      continue;
    }
    c.max_abs_error = std::max(c.max_abs_error, error);
    if (error > c.allowed_error) ++c.mismatched;
  }
  return c;
}

}  // namespace sluice::loadtest
