// One sluice server: both front ends (KServe v2 over gRPC and HTTP) over one ModelHub. Start() checks the TLS
// files and binds both ports at once — before any model loads, so probes get "not ready" (HTTP 503, gRPC
// NOT_SERVING / ready=false) rather than "connection refused" — and refuses to start when a port is in use.
// LoadModels() loads and warms the repository and then reports ready; Drain() stops taking work, finishes what
// was accepted and closes the listeners. Usable in-process (tests) as well as from main.
// Thread-safety: Start, LoadModels and Drain are called in that order from one thread; hub() may be used from
// any thread.
#pragma once

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backend/base/server_config.h"
#include "backend/model_repository.h"
#include "server/hub/model_hub.h"
#include "server/metrics/server_metrics.h"

namespace grpc {
class Server;
}

namespace sluice {

class HttpService;
class InferenceGrpcService;
namespace voice {
class OpenAiTranscriptions;
class RivaAsrService;
}

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerConfig& config);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Loads and warms every model of the repository, wires each to its scheduler and metrics, then marks the
  // server ready. An error leaves the server not ready (the caller exits). `cancel` (may be null), set from
  // another thread, stops the loading early with Cancelled (RepositoryOptions::cancel): the repository loaded so
  // far is destroyed before this returns (every backend released its device).
  absl::Status LoadModels(const std::atomic<bool>* cancel = nullptr);

  // Not ready at once, new inference refused (Unavailable), accepted requests finished — a Riva Recognize or
  // stream admitted before (ServingState::Admit) to its end, later windows included. Returns false when the
  // grace period ran out first (requests are still running). The listeners are closed only when it returns true.
  bool Drain(absl::Duration grace);

  int grpc_port() const { return grpc_port_; }
  int http_port() const;
  ModelHub& hub() { return *hub_; }

 private:
  explicit Server(const ServerConfig& config);
  absl::Status StartGrpc();
  absl::Status StartHttp();
  void CloseListeners();

  const ServerConfig config_;
  const absl::Time start_;  // cost accrues from here: loading is paid time
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<ModelRepository> repository_;  // the backends; outlives the hub's models (declared first)
  std::unique_ptr<ModelHub> hub_;
  std::unique_ptr<InferenceGrpcService> grpc_service_;
  std::unique_ptr<voice::RivaAsrService> riva_service_;  // speech recognition on the same port
  // POST /v1/audio/transcriptions over riva_service_'s models, decode admission and metrics (HTTP port).
  std::unique_ptr<voice::OpenAiTranscriptions> transcriptions_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<HttpService> http_;
  int grpc_port_ = 0;
};

}  // namespace sluice
