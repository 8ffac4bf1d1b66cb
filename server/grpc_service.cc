#include "server/grpc_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/grpc_codec.h"

namespace sluice {
namespace {

constexpr char kServerVersion[] = "0.1.0";

// One ModelInfer call: lives from the handler until gRPC's OnDone. Finished exactly once, by the completion
// (scheduler thread) or by the handler on an immediate error.
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(ServedModel* model, const inference::ModelInferRequest* request,
               inference::ModelInferResponse* response)
      : model_(model), request_(request), response_(response) {}

  void Start(grpc::CallbackServerContext* context) {
    absl::StatusOr<DecodedInferRequest> decoded = DecodeInferRequest(*request_);
    if (!decoded.ok()) return Fail(decoded.status());
    absl::StatusOr<std::vector<size_t>> selected = SelectOutputs(model_->config(), decoded->requested_outputs);
    if (!selected.ok()) return Fail(selected.status());
    absl::StatusOr<ValidatedRequest> validated = ValidateRequest(model_->config(), decoded->inputs);
    if (!validated.ok()) return Fail(validated.status());
    SubmitOptions options;
    const absl::Time now = absl::Now();
    if (context->deadline() != std::chrono::system_clock::time_point::max()) {
      options.deadline = absl::FromChrono(context->deadline());
    }
    if (absl::Status s = ApplyInferParameters(request_->parameters(), now, options); !s.ok()) return Fail(s);
    const bool raw = decoded->raw;
    absl::StatusOr<std::shared_ptr<PendingInference>> pending = model_->Submit(
        *std::move(validated), options,
        [this, raw, selected = *selected](absl::StatusOr<std::vector<HostTensor>> outputs) {
          if (!outputs.ok()) return Finish(ToGrpcStatus(outputs.status()));
          EncodeInferResponse(model_->config(), *request_, selected, *std::move(outputs), raw, *response_);
          Finish(grpc::Status::OK);
        });
    if (!pending.ok()) return Finish(ToGrpcStatus(pending.status()));  // Submit counted the refusal
    {
      absl::MutexLock lock(&mu_);
      pending_ = *pending;
    }
    if (context->IsCancelled()) (*pending)->Cancel();
  }

  void OnCancel() override {
    std::shared_ptr<PendingInference> pending;
    {
      absl::MutexLock lock(&mu_);
      pending = pending_;
    }
    if (pending) pending->Cancel();
  }

  void OnDone() override { delete this; }

 private:
  // Refused before Submit: counted here, once.
  void Fail(const absl::Status& status) {
    model_->RecordRefused(status);
    Finish(ToGrpcStatus(status));
  }

  ServedModel* const model_;
  const inference::ModelInferRequest* const request_;
  inference::ModelInferResponse* const response_;
  absl::Mutex mu_;
  std::shared_ptr<PendingInference> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

InferenceGrpcService::InferenceGrpcService(ModelHub* hub, std::string bearer_token)
    : hub_(hub), bearer_token_(std::move(bearer_token)) {}

grpc::Status InferenceGrpcService::CheckAuth(grpc::CallbackServerContext* context) const {
  if (bearer_token_.empty()) return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end() && std::string_view(it->second.data(), it->second.size()) == "Bearer " + bearer_token_) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      it == metadata.end() ? "missing 'authorization: Bearer <token>' metadata"
                                           : "invalid bearer token");
}

grpc::ServerUnaryReactor* InferenceGrpcService::Reply(grpc::CallbackServerContext* context,
                                                      const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceGrpcService::ServerLive(grpc::CallbackServerContext* context,
                                                           const inference::ServerLiveRequest*,
                                                           inference::ServerLiveResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  response->set_live(true);
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ServerReady(grpc::CallbackServerContext* context,
                                                            const inference::ServerReadyRequest*,
                                                            inference::ServerReadyResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  response->set_ready(hub_->ready());
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelReady(grpc::CallbackServerContext* context,
                                                           const inference::ModelReadyRequest* request,
                                                           inference::ModelReadyResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  absl::StatusOr<ServedModel*> model = hub_->Find(request->name(), request->version());
  if (!model.ok()) return Reply(context, ToGrpcStatus(model.status()));
  response->set_ready(hub_->ready());
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ServerMetadata(grpc::CallbackServerContext* context,
                                                               const inference::ServerMetadataRequest*,
                                                               inference::ServerMetadataResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  response->set_name("sluice");
  response->set_version(kServerVersion);
  for (const char* extension : {"model_configuration", "statistics", "schedule_policy", "binary_tensor_data"}) {
    response->add_extensions(extension);
  }
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelMetadata(grpc::CallbackServerContext* context,
                                                              const inference::ModelMetadataRequest* request,
                                                              inference::ModelMetadataResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  absl::StatusOr<ServedModel*> model = hub_->Find(request->name(), request->version());
  if (!model.ok()) return Reply(context, ToGrpcStatus(model.status()));
  FillModelMetadata((*model)->config(), *response);
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelInfer(grpc::CallbackServerContext* context,
                                                           const inference::ModelInferRequest* request,
                                                           inference::ModelInferResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  absl::StatusOr<ServedModel*> model = hub_->Find(request->model_name(), request->model_version());
  if (!model.ok()) return Reply(context, ToGrpcStatus(model.status()));
  if (hub_->draining()) {
    return Reply(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is draining; not accepting requests"));
  }
  auto* reactor = new InferReactor(*model, request, response);
  reactor->Start(context);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelConfig(grpc::CallbackServerContext* context,
                                                            const inference::ModelConfigRequest* request,
                                                            inference::ModelConfigResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  absl::StatusOr<ServedModel*> model = hub_->Find(request->name(), request->version());
  if (!model.ok()) return Reply(context, ToGrpcStatus(model.status()));
  FillModelConfig((*model)->config(), *response->mutable_config());
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelStatistics(grpc::CallbackServerContext* context,
                                                                const inference::ModelStatisticsRequest* request,
                                                                inference::ModelStatisticsResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  if (!request->name().empty()) {
    absl::StatusOr<ServedModel*> model = hub_->Find(request->name(), request->version());
    if (!model.ok()) return Reply(context, ToGrpcStatus(model.status()));
    FillModelStatistics((*model)->config(), (*model)->stats().Snapshot(), *response->add_model_stats());
    return Reply(context, grpc::Status::OK);
  }
  for (const auto& model : hub_->models()) {
    FillModelStatistics(model->config(), model->stats().Snapshot(), *response->add_model_stats());
  }
  return Reply(context, grpc::Status::OK);
}

}  // namespace sluice
