// The load generator's view of a KServe v2 server: inference calls sent asynchronously, each ending in a
// callback, and the blocking metadata, config and statistics requests. Two implementations, chosen by
// Options::protocol: gRPC (GrpcInferClient, the callback API) and HTTP/REST with the binary tensor data
// extension (HttpInferClient). Results use gRPC status codes either way (HTTP statuses are mapped), so that
// runs over both protocols are reported and compared alike.
// Thread-safety: thread-safe. Callbacks run on the client's threads and must be short; they may call Send().
// REQUIRES: the client outlives every call it sent (the destructor cancels and waits for them).
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpc_service.pb.h"

namespace sluice::loadtest {

class InferClient {
 public:
  struct Options {
    std::string protocol = "grpc";  // grpc | http
    std::string address = "localhost:8001";  // host:port
    int channels = 1;               // gRPC: channels (HTTP/2 connections), used round robin
    int max_connections = 1024;     // HTTP: most calls (connections, threads) in flight at once
    std::string bearer_token;       // sent as "authorization: Bearer <token>" when not empty
  };
  using Done = std::function<void(const grpc::Status&, const inference::ModelInferResponse&)>;

  static absl::StatusOr<std::unique_ptr<InferClient>> Create(const Options& options);
  virtual ~InferClient() = default;

  // Sends one call; `done` runs once when it ends (OK, error, deadline or cancellation).
  virtual void Send(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline,
                    Done done) = 0;
  // Cancels every call in flight; their callbacks still run (CANCELLED).
  virtual void CancelAll() = 0;
  // Blocks until no call is in flight or `timeout` passes; true when none is.
  virtual bool WaitIdle(absl::Duration timeout) = 0;
  virtual int64_t in_flight() const = 0;

  // Blocking, each bounded by 10 s.
  virtual grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) = 0;
  virtual grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) = 0;
  virtual grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) = 0;

  // One blocking inference call (Send and wait).
  grpc::Status Infer(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline,
                     inference::ModelInferResponse* response);

  const Options& options() const { return options_; }

  InferClient(const InferClient&) = delete;
  InferClient& operator=(const InferClient&) = delete;

 protected:
  explicit InferClient(const Options& options) : options_(options) {}

  const Options options_;
};

// The load generator's own result codes beside gRPC's: -1 an open-loop arrival dropped (--max-outstanding calls in
// flight); -2 a generation whose `usage` disagrees with what was streamed or asked for (openai_stream.h).
inline constexpr int kClientDroppedCode = -1;
inline constexpr int kUsageMismatchCode = -2;

// Canonical upper-case name of a gRPC code ("DEADLINE_EXCEEDED"); "CLIENT_DROPPED" (-1) and "USAGE_MISMATCH" (-2)
// for the load generator's own codes above.
std::string GrpcCodeName(int code);

}  // namespace sluice::loadtest
