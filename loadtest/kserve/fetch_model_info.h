// What a KServe v2 server (gRPC or HTTP) says about a served model, as a ModelInfo (core/model_info.h):
// ModelMetadata for the input's name, datatype and shape; Triton's ModelConfig for sluice's `kind` and
// `bucket_lengths` parameters, else the local config.yaml in --model-repository.
// Thread-safety: a free function; the client must outlive the call.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "loadtest/core/model_info.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

// Asks the server. `model_repository` (optional, may be empty) is read for the sample rate of speech inputs,
// and for the kind and bucket lengths when the server's ModelConfig does not carry them (sluice's REST config
// route lacks Triton's `parameters`); without a sample rate 16000 is assumed. `max_length_override` > 0 replaces
// the bucket-derived maximum.
absl::StatusOr<ModelInfo> FetchModelInfo(InferClient& client, const std::string& model,
                                         const std::string& model_repository, int64_t max_length_override);

}  // namespace sluice::loadtest
