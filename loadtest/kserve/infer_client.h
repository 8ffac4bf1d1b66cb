// The load generator's view of a KServe v2 server: inference calls sent asynchronously through the runner's seam
// (LoadClient, core/load_client.h: a Call in, an Outcome out; the protobufs are built here, call_proto.h), and the
// blocking metadata, config and statistics requests. Two implementations, chosen by ClientOptions::protocol
// (core/client_options.h): gRPC (GrpcInferClient, the callback API) and HTTP/REST with the binary tensor data
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
#include "loadtest/core/client_options.h"
#include "loadtest/core/load_client.h"

namespace sluice::loadtest {

class InferClient : public LoadClient {
 public:
  using Options = ClientOptions;
  static absl::StatusOr<std::unique_ptr<InferClient>> Create(const Options& options);
  ~InferClient() override = default;

  // Blocking, each bounded by 10 s.
  virtual grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) = 0;
  virtual grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) = 0;
  virtual grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) = 0;

  // One blocking KServe inference call (the request as a Call, Send and wait, the Outcome as a response).
  grpc::Status Infer(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline,
                     inference::ModelInferResponse* response);

  const Options& options() const { return options_; }

  InferClient(const InferClient&) = delete;
  InferClient& operator=(const InferClient&) = delete;

 protected:
  explicit InferClient(const Options& options) : options_(options) {}

  const Options options_;
};

}  // namespace sluice::loadtest
