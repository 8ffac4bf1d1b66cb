// --api kserve's driver (core/api_driver.h): KServe v2 inference over gRPC or HTTP, each request one ModelInfer
// call through the `control` client itself (runner.h).
// Thread-safety: as ApiDriver.
#pragma once

#include <memory>

#include "loadtest/core/api_driver.h"

namespace sluice::loadtest {

std::unique_ptr<ApiDriver> MakeKServeDriver();

// The KServe v2 answers every API's driver shares where the API has none of its own: ModelMetadata/ModelConfig
// through `control` (the sample rate from the repository), and --verify of the model's reference set.
absl::StatusOr<ModelInfo> DescribeOverKServe(InferClient& control, const std::string& model,
                                             const AppOptions& options);
absl::StatusOr<VerifyReport> VerifyOverKServe(InferClient& control, const ModelInfo& model,
                                              const AppOptions& options);

}  // namespace sluice::loadtest
