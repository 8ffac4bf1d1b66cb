// InferClient over KServe v2 REST with the binary tensor data extension (cpp-httplib), its calls made on an
// HttpWorkerPool (http/http_worker_pool.h: a connection and thread per call in flight, on demand, up to
// `max_connections`; CancelAll() shuts the sockets of calls in flight). Deadlines travel as Triton's "timeout"
// parameter and bound the client's own wait. Metadata, config and statistics come from
// GET /v2/models/{m}[/config|/stats], parsed into the gRPC messages.
// Thread-safety: thread-safe. Callbacks run on worker threads and must be short; they may call Send().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "loadtest/http/http_worker_pool.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

class HttpInferClient final : public InferClient {
 public:
  // REQUIRES: options.address is host:port.
  explicit HttpInferClient(const Options& options);
  // The pool's destructor cancels the calls in flight, waits for them and stops its workers.
  ~HttpInferClient() override = default;

  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override {
    pool_.Send(std::move(call), deadline, std::move(done));
  }
  void CancelAll() override { pool_.CancelAll(); }
  bool WaitIdle(absl::Duration timeout) override { return pool_.WaitIdle(timeout); }
  int64_t in_flight() const override { return pool_.in_flight(); }

  grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) override;
  grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) override;
  grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) override;

 private:
  // One call on a worker's connection (the pool's Execute): the call as a KServe request (call_proto.h).
  Outcome Execute(httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch);
  grpc::Status InferOverHttp(httplib::Client& client, const inference::ModelInferRequest& request,
                             std::chrono::system_clock::time_point deadline, uint64_t epoch,
                             inference::ModelInferResponse* response);
  // GET `path`, the body parsed as JSON into `message` (unknown fields ignored).
  grpc::Status GetJson(const std::string& path, google::protobuf::Message* message);

  HttpWorkerPool pool_;  // last: destroyed (its workers stopped) first
};

}  // namespace sluice::loadtest
