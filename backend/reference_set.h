// The reference cases exported next to a model by backend/compile/: inputs of many real lengths with the
// outputs the eager model computed on each alone, unpadded, at batch 1. The yardstick for every correctness
// test and for the load test's --verify.
// Thread-safety: plain values.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/tensor.h"

namespace sluice {

struct ReferenceCase {
  std::vector<HostTensor> inputs;   // unbatched, real length: [len, ...]
  std::vector<HostTensor> outputs;  // unbatched, trimmed to the real output length
  int64_t length() const { return inputs.front().shape.front(); }
};

// Reads <model_dir>/reference.pt (buffers case{k}_input{j}, case{k}_output{j}, case_count).
absl::StatusOr<std::vector<ReferenceCase>> LoadReferenceSet(const std::string& model_dir);

}  // namespace sluice
