// Renders a protobuf message as the JSON that KServe v2 REST and Triton's HTTP API use, so the HTTP front end
// serves the very messages the gRPC front end builds (server/kserve/model_descriptions.h): field names as in the .proto
// (snake_case), 64-bit integers as JSON numbers (proto3's canonical JSON mapping would quote them, which KServe
// clients do not accept for shapes and counts), enums by name, maps as objects, every scalar and repeated field
// printed even when default, singular messages only when set.
// Thread-safety: pure function.
#pragma once

#include <string>

#include <google/protobuf/message.h>

namespace sluice {

std::string ProtoToKserveJson(const google::protobuf::Message& message);

}  // namespace sluice
