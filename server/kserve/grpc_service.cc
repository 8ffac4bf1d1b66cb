#include "server/kserve/grpc_service.h"

#include <chrono>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backend/base/sync.h"
#include "server/kserve/bearer_auth.h"
#include "server/kserve/grpc_codec.h"
#include "server/llm/frontend/triton_stream.h"
#include "server/llm/frontend/triton_stream_codec.h"
#include "server/kserve/model_descriptions.h"
#include "server/kserve/model_lookup.h"

namespace sluice {
namespace {

// One ModelInfer call: lives from the handler until gRPC's OnDone. Finished exactly once, by the completion of
// ServedModel::Infer (on the handler's thread when refused, otherwise on a scheduler thread).
class InferReactor final : public grpc::ServerUnaryReactor {
 public:
  InferReactor(ServedModel* model, const inference::ModelInferRequest* request,
               inference::ModelInferResponse* response)
      : model_(model), request_(request), response_(response) {}

  void Start(grpc::CallbackServerContext* context) {
    absl::StatusOr<GrpcInferCall> decoded = DecodeInferRequest(*request_);
    absl::StatusOr<InferCall> call = absl::UnknownError("not decoded");
    bool raw = false;
    if (!decoded.ok()) {
      call = decoded.status();
    } else {
      raw = decoded->raw;
      call = std::move(decoded->call);
      if (context->deadline() != std::chrono::system_clock::time_point::max()) {
        call->transport_deadline = absl::FromChrono(context->deadline());
      }
    }
    InferHandle handle = model_->Infer(std::move(call), [this, raw](absl::StatusOr<InferResult> result) {
      if (!result.ok()) return Finish(ToGrpcStatus(result.status()));
      EncodeInferResponse(model_->config(), request_->id(), *std::move(result), raw, *response_);
      Finish(grpc::Status::OK);
    });
    {
      sluice::MutexLock lock(&mu_);
      handle_ = handle;
    }
    if (context->IsCancelled()) handle.Cancel();
  }

  void OnCancel() override {
    InferHandle handle;
    {
      sluice::MutexLock lock(&mu_);
      handle = handle_;
    }
    handle.Cancel();
  }

  void OnDone() override { delete this; }

 private:
  ServedModel* const model_;
  const inference::ModelInferRequest* const request_;
  inference::ModelInferResponse* const response_;
  sluice::Mutex mu_;
  InferHandle handle_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

InferenceGrpcService::InferenceGrpcService(ModelHub* hub, std::string bearer_token)
    : hub_(hub), bearer_token_(std::move(bearer_token)) {}

grpc::Status CheckGrpcBearer(const grpc::CallbackServerContext* context, const std::string& bearer_token) {
  if (bearer_token.empty()) return grpc::Status::OK;
  const auto& metadata = context->client_metadata();
  auto it = metadata.find("authorization");
  std::optional<std::string_view> header;
  if (it != metadata.end()) header = std::string_view(it->second.data(), it->second.size());
  return ToGrpcStatus(CheckBearer(header, bearer_token));
}

grpc::Status InferenceGrpcService::CheckAuth(grpc::CallbackServerContext* context) const {
  return CheckGrpcBearer(context, bearer_token_);
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
  absl::StatusOr<bool> ready = ModelIsReady(*hub_, request->name(), request->version());
  if (!ready.ok()) return Reply(context, ToGrpcStatus(ready.status()));
  response->set_ready(*ready);
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ServerMetadata(grpc::CallbackServerContext* context,
                                                               const inference::ServerMetadataRequest*,
                                                               inference::ServerMetadataResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  FillServerMetadata(*response);
  return Reply(context, grpc::Status::OK);
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelMetadata(grpc::CallbackServerContext* context,
                                                              const inference::ModelMetadataRequest* request,
                                                              inference::ModelMetadataResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  return Reply(context, ToGrpcStatus(DescribeModel(*hub_, request->name(), request->version(), *response)));
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelInfer(grpc::CallbackServerContext* context,
                                                           const inference::ModelInferRequest* request,
                                                           inference::ModelInferResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  absl::StatusOr<ServedModel*> model = FindInferModel(*hub_, request->model_name(), request->model_version());
  if (!model.ok()) return Reply(context, ToGrpcStatus(model.status()));
  auto* reactor = new InferReactor(*model, request, response);
  reactor->Start(context);
  return reactor;
}

grpc::ServerUnaryReactor* InferenceGrpcService::ModelConfig(grpc::CallbackServerContext* context,
                                                            const inference::ModelConfigRequest* request,
                                                            inference::ModelConfigResponse* response) {
  if (grpc::Status auth = CheckAuth(context); !auth.ok()) return Reply(context, auth);
  return Reply(context, ToGrpcStatus(DescribeModelConfig(*hub_, request->name(), request->version(),
                                                         *response->mutable_config())));
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

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
InferenceGrpcService::ModelStreamInfer(grpc::CallbackServerContext* context) {
  return StartTritonStream(hub_, CheckAuth(context));
}

}  // namespace sluice
