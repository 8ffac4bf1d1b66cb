// InferClient over KServe v2 REST with the binary tensor data extension (cpp-httplib). httplib's client is
// blocking, so every call in flight needs a connection and a thread: workers are started on demand, one per
// concurrent call (a closed loop of N starts N; an open loop as many as its calls in flight), up to
// `max_connections`, after which calls wait in the client's queue (open-loop latency still counts from the
// scheduled time). Each worker keeps its connection alive between calls. Deadlines travel as Triton's
// "timeout" parameter and bound the client's own wait; CancelAll() shuts the sockets of calls in flight.
// Metadata, config and statistics come from GET /v2/models/{m}[/config|/stats], parsed into the gRPC messages.
// Thread-safety: thread-safe. Callbacks run on worker threads and must be short; they may call Send().
#pragma once

#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "backend/base/sync.h"
#include "loadtest/kserve/infer_client.h"

namespace httplib {
class Client;
}

namespace sluice::loadtest {

class HttpInferClient : public InferClient {
 public:
  // REQUIRES: options.address is host:port.
  explicit HttpInferClient(const Options& options);
  ~HttpInferClient() override;

  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override;
  void CancelAll() override;
  bool WaitIdle(absl::Duration timeout) override;
  int64_t in_flight() const override;

  grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) override;
  grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) override;
  grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) override;

 protected:
  struct Job {
    Call call;
    std::chrono::system_clock::time_point deadline;
    OutcomeDone done;
  };
  // One call on the worker's connection; the outcome its callback gets (here: the call as a KServe request,
  // call_proto.h). A subclass speaking another HTTP API over the same worker pool (OpenAiInferClient) overrides
  // it. `epoch`: see cancelled().
  virtual Outcome Execute(httplib::Client& client, const Job& job, uint64_t epoch);
  // True when CancelAll ran since a call of `epoch` started.
  bool cancelled(uint64_t epoch) const { return cancel_epoch_.load() != epoch; }

 private:
  void WorkerLoop();
  grpc::Status InferOverHttp(httplib::Client& client, const inference::ModelInferRequest& request,
                             std::chrono::system_clock::time_point deadline, uint64_t epoch,
                             inference::ModelInferResponse* response);
  // GET `path`, the body parsed as JSON into `message` (unknown fields ignored).
  grpc::Status GetJson(const std::string& path, google::protobuf::Message* message);

  mutable Mutex mu_;
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_ ABSL_GUARDED_BY(mu_);
  // Each running worker's connection (owned by its thread), for CancelAll to stop.
  absl::flat_hash_set<httplib::Client*> connections_ ABSL_GUARDED_BY(mu_);
  int idle_workers_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // queued and running
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CondVar work_;  // signalled when a job is queued or stop_ is set (idle workers wait on it)
  CondVar idle_;  // signalled when in_flight_ drops to 0
  std::atomic<uint64_t> cancel_epoch_{0};       // raised by CancelAll: calls that fail after it were cancelled
};

}  // namespace sluice::loadtest
