#include "loadtest/infer_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {

struct InferClient::Call {
  grpc::ClientContext context;
  inference::ModelInferRequest request;
  inference::ModelInferResponse response;
  Done done;
};

void AddAuth(grpc::ClientContext& context, const std::string& bearer_token) {
  if (!bearer_token.empty()) context.AddMetadata("authorization", "Bearer " + bearer_token);
}

absl::StatusOr<std::unique_ptr<InferClient>> InferClient::Create(const Options& options) {
  if (options.address.empty() || options.address.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("gRPC address '", options.address, "' is not host:port"));
  }
  std::unique_ptr<InferClient> client(new InferClient(options));
  for (int i = 0; i < std::max(1, options.channels); ++i) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    args.SetInt("sluice.loadtest.channel", i);  // distinct arguments: a connection of its own
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    client->channels_.push_back(grpc::CreateCustomChannel(options.address, grpc::InsecureChannelCredentials(), args));
    client->stubs_.push_back(inference::GRPCInferenceService::NewStub(client->channels_.back()));
  }
  return client;
}

InferClient::~InferClient() {
  CancelAll();
  WaitIdle(absl::Seconds(30));
}

void InferClient::Send(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline,
                       Done done) {
  auto* call = new Call;
  call->request = std::move(request);
  call->done = std::move(done);
  call->context.set_deadline(deadline);
  AddAuth(call->context, options_.bearer_token);
  {
    absl::MutexLock lock(&mu_);
    calls_.insert(call);
  }
  auto& stub = *stubs_[next_channel_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
  stub.async()->ModelInfer(&call->context, &call->request, &call->response,
                           [this, call](grpc::Status status) { Finish(call, status); });
}

void InferClient::Finish(Call* call, const grpc::Status& status) {
  call->done(status, call->response);
  absl::MutexLock lock(&mu_);
  calls_.erase(call);
  delete call;
}

void InferClient::CancelAll() {
  absl::MutexLock lock(&mu_);
  for (Call* call : calls_) call->context.TryCancel();
}

bool InferClient::WaitIdle(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return calls_.empty(); };
  return mu_.AwaitWithTimeout(absl::Condition(&idle), timeout);
}

int64_t InferClient::in_flight() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(calls_.size());
}

std::string GrpcCodeName(int code) {
  static const char* const kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                       "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                       "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if (code == -1) return "CLIENT_DROPPED";
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

}  // namespace sluice::loadtest
