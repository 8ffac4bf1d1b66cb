// --verify: sends every case of a model's reference set (exported next to the model by backend/compile/:
// inputs of many real lengths with the outputs the model computed on each alone, unpadded) through the server
// and compares each output with the reference: largest absolute error, and the cases with any element off by
// more than the tolerance (or of the wrong shape, or failed).
// Thread-safety: VerifyModel blocks its calling thread; the client is thread-safe.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "loadtest/core/model_info.h"
#include "loadtest/core/verify_report.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

// Reads <model_repository>/<model>/reference.pt (through libtorch) and checks every case.
absl::StatusOr<VerifyReport> VerifyModel(InferClient& client, const ModelInfo& model,
                                         const std::string& model_repository, double tolerance, double timeout_ms);

}  // namespace sluice::loadtest
