// The KServe v2 REST front end: health, server/model metadata, readiness, Triton's config and statistics (the
// same protobuf messages the gRPC front end serves, rendered as JSON), /metrics, and infer (JSON tensors and the
// binary-data extension) through ServedModel::Infer. Every route is in one table (http_service.cc). Errors are
// {"error": "..."} with the status from backend/base/status_mapping.h (429 also carries Retry-After).
// Runs on the event-driven HttpServer: handlers never wait; an infer is answered from its completion, and a
// client that disconnects withdraws its queued rows.
// Thread-safety: handlers run on the HTTP event-loop threads and only read the hub; Start/Stop from one thread.
#pragma once

#include <memory>
#include <string>

#include <functional>

#include "absl/status/statusor.h"
#include "backend/base/server_config.h"
#include "server/http/http_exchange.h"
#include "server/hub/model_hub.h"

namespace sluice {

class HttpServer;

struct HttpServiceOptions {
  ModelHub* hub = nullptr;  // must outlive the service
  std::string address;      // host:port, port 0 = any free port
  HttpConfig http;          // event-loop threads, connection and header limits, timeouts
  int64_t max_body_bytes = 64 << 20;
  std::string bearer_token;                 // empty: no check
  std::string tls_cert_path, tls_key_path;  // both set: HTTPS
  // POST /v1/audio/transcriptions (server/voice/openai_transcriptions.h), given by the server so that this
  // library does not depend on the voice one; empty: the route answers 404. Runs on an io thread; may take the body.
  std::function<void(HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange)> transcriptions;
};

class HttpService {
 public:
  // Listens at once (see HttpServer::Start for the errors).
  static absl::StatusOr<std::unique_ptr<HttpService>> Start(const HttpServiceOptions& options);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  int port() const;
  void Stop();

 private:
  HttpService() = default;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace sluice
