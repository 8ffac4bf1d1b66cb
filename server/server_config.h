// The server's own config file (listen addresses, model repository, log level) as validated native types.
// Relative paths are resolved against the config file's directory, so a config works from any cwd.
// Thread-safety: plain values.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace sluice {

struct ServerConfig {
  std::string config_path;
  std::string grpc_address = "0.0.0.0:8001";  // Triton's familiar defaults
  std::string http_address = "0.0.0.0:8000";
  std::string model_repository;  // absolute after loading
  std::string log_level = "info";
};

// Every error names the file, the key and the line; unknown keys are errors (typos never pass silently).
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path);

}  // namespace sluice
