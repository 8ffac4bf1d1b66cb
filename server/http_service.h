// The KServe v2 REST front end on cpp-httplib: health, server/model metadata, readiness, Triton's config and
// stats, and infer (JSON tensors and the binary-data extension). All routes are in one table (http_service.cc).
// Errors are {"error": "..."} with 400/401/404/413/429 (+Retry-After)/503/504.
// Thread-safety: httplib runs handlers on its own thread pool; an infer handler waits for its completion
// (HTTP/1.1 is synchronous per connection). Start/Stop from one thread.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/model_hub.h"

namespace httplib {
class Server;
}

namespace sluice {

struct HttpServiceOptions {
  ModelHub* hub = nullptr;  // must outlive the service
  std::string address;      // host:port, port 0 = any free port
  int64_t max_body_bytes = 64 << 20;
  std::string bearer_token;  // empty: no check
  std::string tls_cert_path, tls_key_path;  // both set: HTTPS
};

class HttpService {
 public:
  static absl::StatusOr<std::unique_ptr<HttpService>> Start(const HttpServiceOptions& options);
  ~HttpService();
  HttpService(const HttpService&) = delete;
  HttpService& operator=(const HttpService&) = delete;

  int port() const { return port_; }
  void Stop();

 private:
  HttpService() = default;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
  int listen_socket_ = -1;  // set while binding; not owned (httplib closes it)
};

}  // namespace sluice
