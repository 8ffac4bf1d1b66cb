#include "loadtest/kserve/grpc_infer_client.h"

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loadtest/kserve/call_proto.h"

namespace sluice::loadtest {

struct GrpcInferClient::InFlight {
  grpc::ClientContext context;
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  OutcomeDone done;
};

std::vector<std::shared_ptr<grpc::Channel>> CreateLoadChannels(const ClientOptions& options) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < std::max(1, options.channels); ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    args.SetInt("sluice.loadtest.channel", i);  // distinct arguments: a connection of its own
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channels.push_back(grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(), args));
  }
  return channels;
}

GrpcInferClient::GrpcInferClient(const Options& options) : InferClient(options) {
  channels_ = CreateLoadChannels(options);
  for (const auto& channel : channels_) stubs_.push_back(inference::GRPCInferenceService::NewStub(channel));
}

GrpcInferClient::~GrpcInferClient() {
  CancelAll();
  WaitIdle(absl::Seconds(30));
}

void GrpcInferClient::Send(Call request, std::chrono::system_clock::time_point deadline, OutcomeDone done) {
  auto owned = std::make_shared<InFlight>();
  InFlight* call = owned.get();
  call->request = RequestFromCall(request);
  call->done = std::move(done);
  call->context.set_deadline(deadline);
  if (!options_.bearer_token.empty()) call->context.AddMetadata("authorization", "Bearer " + options_.bearer_token);
  calls_.Add(std::move(owned));
  auto& stub = *stubs_[next_channel_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
  stub.async()->ModelInfer(&call->context, &call->request, &call->response,
                           [this, call](grpc::Status status) { Finish(call, status); });
}

void GrpcInferClient::Finish(InFlight* call, const grpc::Status& status) {
  call->done(OutcomeFromResponse(status, call->response));
  calls_.Remove(call);  // freed here, unless CancelAll still holds it
}

void GrpcInferClient::CancelAll() {
  // TryCancel is a call into gRPC, so it runs outside the registry's lock (a completion it triggers runs Finish,
  // which takes it); the shared_ptrs keep each call's context alive until then, even when its Finish runs meanwhile.
  for (const std::shared_ptr<InFlight>& call : calls_.Snapshot()) call->context.TryCancel();
}

bool GrpcInferClient::WaitIdle(absl::Duration timeout) { return calls_.WaitIdle(timeout); }

int64_t GrpcInferClient::in_flight() const { return calls_.size(); }

namespace {

template <typename Request>
grpc::Status UnaryControlCall(const std::string& bearer_token, const std::string& model, Request& request,
                              const std::function<grpc::Status(grpc::ClientContext*, const Request&)>& call) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + bearer_token);
  request.set_name(model);
  return call(&context, request);
}

}  // namespace

grpc::Status CallModelMetadata(inference::GRPCInferenceService::Stub& stub, const std::string& bearer_token,
                               const std::string& model, inference::ModelMetadataResponse* response) {
  inference::ModelMetadataRequest request;
  return UnaryControlCall<inference::ModelMetadataRequest>(
      bearer_token, model, request,
      [&](grpc::ClientContext* context, const auto& r) { return stub.ModelMetadata(context, r, response); });
}

grpc::Status CallModelConfig(inference::GRPCInferenceService::Stub& stub, const std::string& bearer_token,
                             const std::string& model, inference::ModelConfigResponse* response) {
  inference::ModelConfigRequest request;
  return UnaryControlCall<inference::ModelConfigRequest>(
      bearer_token, model, request,
      [&](grpc::ClientContext* context, const auto& r) { return stub.ModelConfig(context, r, response); });
}

grpc::Status CallModelStatistics(inference::GRPCInferenceService::Stub& stub, const std::string& bearer_token,
                                 const std::string& model, inference::ModelStatisticsResponse* response) {
  inference::ModelStatisticsRequest request;
  return UnaryControlCall<inference::ModelStatisticsRequest>(
      bearer_token, model, request,
      [&](grpc::ClientContext* context, const auto& r) { return stub.ModelStatistics(context, r, response); });
}

grpc::Status GrpcInferClient::ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) {
  return CallModelMetadata(*stubs_.front(), options_.bearer_token, model, response);
}

grpc::Status GrpcInferClient::ModelConfig(const std::string& model, inference::ModelConfigResponse* response) {
  return CallModelConfig(*stubs_.front(), options_.bearer_token, model, response);
}

grpc::Status GrpcInferClient::ModelStatistics(const std::string& model,
                                              inference::ModelStatisticsResponse* response) {
  return CallModelStatistics(*stubs_.front(), options_.bearer_token, model, response);
}

}  // namespace sluice::loadtest
