// The model lookups that KServe v2 requests over both transports answer with (metadata, config, ready, and which
// model an infer goes to), for every model kind: batched models and text-generation models alike. gRPC and HTTP
// call these and only encode the result, so the two cannot disagree about which models exist or what they are.
// Thread-safety: pure functions of the hub (itself safe from any thread).
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpc_service.pb.h"
#include "server/hub/model_hub.h"

namespace sluice {

// Errors: Unavailable while loading; NotFound naming the model or version (sluice serves version "1"; "" means it).
absl::Status DescribeModel(const ModelHub& hub, std::string_view name, std::string_view version,
                           inference::ModelMetadataResponse& response);
absl::Status DescribeModelConfig(const ModelHub& hub, std::string_view name, std::string_view version,
                                 inference::ModelConfig& config);
// Whether the model takes requests: false while the server drains or when no instance is left in rotation.
absl::StatusOr<bool> ModelIsReady(const ModelHub& hub, std::string_view name, std::string_view version);
// The batched model a KServe infer names; a generation model is InvalidArgument pointing at streaming.
absl::StatusOr<ServedModel*> FindInferModel(const ModelHub& hub, std::string_view name, std::string_view version);

}  // namespace sluice
