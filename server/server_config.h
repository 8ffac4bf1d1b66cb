// The server's own config file (listen addresses and limits, keepalive, TLS, bearer token, drain grace period,
// model repository, log level, instance price for cost metrics) as validated native types.
// Relative paths are resolved against the config file's directory, so a config works from any cwd.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/cost.h"

namespace sluice {

struct ServerConfig {
  std::string config_path;
  std::string grpc_address = "0.0.0.0:8001";  // Triton's familiar defaults
  std::string http_address = "0.0.0.0:8000";
  std::string model_repository;  // absolute after loading
  std::string log_level = "info";

  int64_t max_message_bytes = 64 << 20;   // gRPC message / HTTP body limit (both directions)
  int64_t keepalive_time_ms = 30000;      // gRPC server keepalive pings
  int64_t keepalive_timeout_ms = 10000;
  std::string tls_cert_path;              // both set: gRPC and HTTP serve TLS; absolute after loading
  std::string tls_key_path;
  std::string bearer_token;               // non-empty: every call needs "authorization: Bearer <token>"
  double drain_grace_seconds = 30.0;      // SIGTERM: time allowed to finish accepted requests
  std::optional<CostConfig> cost;         // absent: no cost metrics
};

// Every error names the file, the key and the line; unknown keys are errors (typos never pass silently).
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path);

}  // namespace sluice
