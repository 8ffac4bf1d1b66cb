// What the server says about its models, built once as the KServe v2 / Triton protobuf messages: model metadata,
// Triton's ModelConfig and ModelStatistics. The gRPC front end returns them as they are; the HTTP front end
// renders the same messages as JSON (server/kserve/proto_json.h). Which model a request names (batched or generation) is
// decided once for both in server/kserve/model_lookup.h, so the transports agree on every model kind.
// Thread-safety: pure functions.
#pragma once

#include "backend/base/model_config.h"
#include "grpc_service.pb.h"
#include "server/metrics/model_stats.h"

namespace sluice {

void FillModelMetadata(const ModelConfig& model, inference::ModelMetadataResponse& response);
void FillModelConfig(const ModelConfig& model, inference::ModelConfig& config);
void FillModelStatistics(const ModelConfig& model, const ModelStatsSnapshot& stats,
                         inference::ModelStatistics& out);
// The server metadata (name, version, extensions) both transports answer.
void FillServerMetadata(inference::ServerMetadataResponse& response);

}  // namespace sluice
