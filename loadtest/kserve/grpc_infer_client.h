// InferClient over KServe v2 gRPC (the callback API): ModelInfer calls over one or more channels (round robin;
// each its own HTTP/2 connection), metadata, config and statistics as unary calls on the first channel.
// Thread-safety: thread-safe. Callbacks run on gRPC's threads and must be short; they may call Send().
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "loadtest/core/call_registry.h"
#include "grpc_service.grpc.pb.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

// The client's channels: options.channels of them (at least one), each its own HTTP/2 connection, with no
// message size limits. Shared by every gRPC API the load generator speaks.
std::vector<std::shared_ptr<grpc::Channel>> CreateLoadChannels(const ClientOptions& options);

// The KServe v2 control calls every gRPC client makes as unary calls on `stub`: a 10 s deadline and the bearer token
// (when not empty) in `authorization`.
grpc::Status CallModelMetadata(inference::GRPCInferenceService::Stub& stub, const std::string& bearer_token,
                               const std::string& model, inference::ModelMetadataResponse* response);
grpc::Status CallModelConfig(inference::GRPCInferenceService::Stub& stub, const std::string& bearer_token,
                             const std::string& model, inference::ModelConfigResponse* response);
grpc::Status CallModelStatistics(inference::GRPCInferenceService::Stub& stub, const std::string& bearer_token,
                                 const std::string& model, inference::ModelStatisticsResponse* response);

class GrpcInferClient final : public InferClient {
 public:
  // REQUIRES: options.address is host:port.
  explicit GrpcInferClient(const Options& options);
  ~GrpcInferClient() override;

  // The call is sent as RequestFromCall (call_proto.h) builds it; the answer comes back as OutcomeFromResponse.
  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override;
  void CancelAll() override;
  bool WaitIdle(absl::Duration timeout) override;
  int64_t in_flight() const override;

  grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) override;
  grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) override;
  grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) override;

 private:
  struct InFlight;
  void Finish(InFlight* call, const grpc::Status& status);

  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  std::atomic<uint64_t> next_channel_{0};

  CallRegistry<InFlight> calls_;  // in flight; CancelAll calls TryCancel outside its lock
};

}  // namespace sluice::loadtest
