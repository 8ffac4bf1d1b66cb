// The server's own config file (listen addresses and limits, keepalive, TLS, bearer token, drain grace period,
// model repository, log level, instance price for cost metrics, the voice front end) as validated native types.
// Relative paths are resolved against the config file's directory, so a config works from any cwd.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "backend/base/cost.h"

namespace sluice {

// The HTTP front end's event loop and the limits that keep hostile clients from costing more than their own
// requests (see server/http/http_server.h).
struct HttpConfig {
  int64_t threads = 2;               // event-loop threads (they only parse, route and serialize)
  int64_t max_connections = 4096;    // at the limit the oldest idle connection is closed for a new one
  int64_t max_header_bytes = 16384;  // request line + headers; over it: 431
  int64_t header_timeout_ms = 10000;  // a request head must arrive within this
  int64_t body_timeout_ms = 60000;    // its body within this
  int64_t idle_timeout_ms = 60000;    // keep-alive connections idle longer are closed
};

// The voice (Riva speech recognition) front end: server/voice/.
struct VoiceConfig {
  // Riva's default speech model (RecognitionConfig.model empty). Empty: the first speech model in name order.
  // Checked once the models have loaded: it must name a served speech model, else the server does not start.
  std::string default_model;
  std::string default_model_where;  // "file:line:col: voice.default_model: ", prefixing that check's error
  // A stream that sends no message for this long (after its config) ends with DEADLINE_EXCEEDED.
  int64_t stream_idle_timeout_ms = 60000;
  int64_t decode_threads = 2;         // audio decodes running at once (a oneTBB arena), off the gRPC threads
  int64_t max_waiting_decodes = 16;   // admitted beyond those; more: RESOURCE_EXHAUSTED
  int64_t max_decode_bytes = int64_t{1} << 30;  // estimated peak memory of the admitted decodes
};

struct ServerConfig {
  std::string config_path;
  std::string grpc_address = "0.0.0.0:8001";  // Triton's familiar defaults
  std::string http_address = "0.0.0.0:8000";
  HttpConfig http;
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
  VoiceConfig voice;
};

// Every error names the file, the key and the line; unknown keys are errors (typos never pass silently).
absl::StatusOr<ServerConfig> LoadServerConfig(const std::string& path);

}  // namespace sluice
