// Compares a served output with a reference output: shape, largest absolute error and the number of
// elements off by more than a tolerance. The served output ran in a padded bucket and the reference unpadded: two
// graph shapes whose BLAS kernels round differently, more so for larger values, so the tolerance is relative to
// the reference's largest |value| (absolute when that is below 1). Also decodes a ModelInferResponse output (raw or typed contents)
// into doubles. The arithmetic behind --verify, kept free of libtorch so that it is unit-tested directly.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/tensor.h"
#include "grpc_service.pb.h"

namespace sluice::loadtest {

struct DecodedOutput {
  std::vector<int64_t> shape;
  std::vector<double> values;
};

// Output `name` of a response, in either encoding. FP32, INT64, INT32 and BOOL are decoded.
absl::StatusOr<DecodedOutput> DecodeOutput(const inference::ModelInferResponse& response, const std::string& name);

// A host tensor's values as doubles (FP32, INT64, INT32, BOOL; FP16 is unsupported and yields an error).
absl::StatusOr<std::vector<double>> ToDoubles(const HostTensor& tensor);

struct TensorComparison {
  bool shape_matches = false;
  int64_t elements = 0;
  int64_t mismatched = 0;   // |got - expected| > allowed_error (or either is NaN); all elements when shapes differ
  double allowed_error = 0; // tolerance * max(1, max |expected|)
  double max_abs_error = 0; // over the compared elements; +inf when shapes differ
  bool ok() const { return shape_matches && mismatched == 0; }
};

// `got_shape` may carry a leading batch dimension of 1 that `expected_shape` lacks.
TensorComparison CompareTensor(const std::vector<int64_t>& got_shape, const std::vector<double>& got,
                               const std::vector<int64_t>& expected_shape, const std::vector<double>& expected,
                               double tolerance);

}  // namespace sluice::loadtest
