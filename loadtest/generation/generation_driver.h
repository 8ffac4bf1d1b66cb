// The generation APIs' driver (core/api_driver.h): --api openai (streamed /v1/completions or chat over HTTP) and
// triton-stream (Triton's decoupled ModelStreamInfer over gRPC); GenerationLoad (generation_load.h) runs them with
// the plan of real-text or synthetic prompts (generation_app.h: the model's tokenizer).
// Thread-safety: as ApiDriver.
#pragma once

#include <memory>

#include "loadtest/core/api_driver.h"

namespace sluice::loadtest {

// REQUIRES: IsGenerationApi(api).
std::unique_ptr<ApiDriver> MakeGenerationDriver(Api api);

}  // namespace sluice::loadtest
