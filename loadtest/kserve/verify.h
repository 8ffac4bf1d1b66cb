// --verify: sends every case of a model's reference set (exported next to the model by backend/compile/:
// inputs of many real lengths with the outputs the model computed on each alone, unpadded) through the server
// and compares each output with the reference: largest absolute error, and the cases with any element off by
// more than the tolerance (or of the wrong shape, or failed).
// Thread-safety: VerifyModel blocks its calling thread; the client is thread-safe.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/kserve/model_info.h"

namespace sluice::loadtest {

struct VerifyReport {
  std::string model;
  double tolerance = 1e-4;
  int cases = 0;
  int mismatched_cases = 0;   // wrong shape, an element over tolerance, or a failed call
  int failed_calls = 0;
  int64_t mismatched_elements = 0;
  double max_abs_error = 0;
  std::vector<std::string> failures;  // the first few, described
  // Generation (generation_app.h): cases compared token for token; mismatched_elements counts the reference tokens
  // from each mismatched case's first differing token on.
  bool generation = false;

  bool ok() const { return cases > 0 && mismatched_cases == 0; }
};

// Reads <model_repository>/<model>/reference.pt (through libtorch) and checks every case.
absl::StatusOr<VerifyReport> VerifyModel(InferClient& client, const ModelInfo& model,
                                         const std::string& model_repository, double tolerance, double timeout_ms);

}  // namespace sluice::loadtest
