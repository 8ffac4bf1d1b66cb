// Where the example models exported at build time live (CTest sets SLUICE_TEST_MODELS), and helpers that
// build padded batches from reference cases.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "backend/reference_set.h"

namespace sluice::testing {

inline std::string ExampleModelsDir() {
  const char* dir = std::getenv("SLUICE_TEST_MODELS");
  if (dir == nullptr || *dir == '\0') {
    ADD_FAILURE() << "SLUICE_TEST_MODELS is not set: run through ctest (tests/run.sh) so the exported models are found";
    return "/nonexistent";
  }
  return dir;
}

inline std::string ExampleModelDir(const std::string& name) { return ExampleModelsDir() + "/" + name; }

// A padded batch of `rows` (each an unbatched input list of a reference case) in bucket (batch, length).
// The padding is filled with random values (not zeros): models must mask it, whatever it holds.
inline PaddedBatch BatchOfCases(const ModelConfig& model, int batch_size, int64_t length,
                                const std::vector<const ReferenceCase*>& rows, std::mt19937& rng) {
  PaddedBatch batch{batch_size, length, {}, {}};
  for (size_t j = 0; j < model.inputs.size(); ++j) {
    const TensorSpec& spec = model.inputs[j];
    std::vector<int64_t> shape = {batch_size, length};
    shape.insert(shape.end(), spec.shape.begin() + 1, spec.shape.end());
    HostTensor t = HostTensor::Zeros(spec.dtype, shape);
    const size_t row_bytes = t.bytes.size() / batch_size;
    // Fill everything with noise first, then copy each row's real data over its front.
    std::uniform_int_distribution<int> byte(0, 255);
    if (spec.dtype == DataType::kFp32) {
      std::uniform_real_distribution<float> noise(-3.f, 3.f);
      for (float& v : t.values<float>()) v = noise(rng);
    } else if (spec.dtype == DataType::kInt64) {
      std::uniform_int_distribution<int64_t> token(0, 50);
      for (int64_t& v : t.values<int64_t>()) v = token(rng);
    }
    for (int r = 0; r < batch_size; ++r) {
      const HostTensor& real = rows[r]->inputs[j];
      std::copy(real.bytes.begin(), real.bytes.end(), t.bytes.begin() + r * row_bytes);
    }
    batch.inputs.push_back(std::move(t));
  }
  for (int r = 0; r < batch_size; ++r) batch.row_lengths.push_back(rows[r]->length());
  return batch;
}

// Max abs difference between row `row` of a padded FP32 output and an unbatched reference output, over the
// reference's extent (its first dim is the real output length for variable outputs).
inline float MaxAbsDiffOnRow(const HostTensor& padded, int row, const HostTensor& reference) {
  const int64_t row_elements = padded.num_elements() / padded.shape[0];
  auto got = padded.values<float>().subspan(row * row_elements, row_elements);
  auto want = reference.values<float>();
  float max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
  return max_diff;
}

}  // namespace sluice::testing
