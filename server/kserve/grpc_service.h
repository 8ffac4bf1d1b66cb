// The KServe v2 gRPC front end (GRPCInferenceService, callback API) plus Triton's ModelConfig and
// ModelStatistics. Handlers only decode, call ServedModel::Infer (the one request path) and encode: ModelInfer
// reactors are finished by its completion; a cancelled call withdraws its queued rows. Text-generation models are
// served by ModelStreamInfer (GenerationModel::Generate); ModelReady/ModelMetadata/ModelConfig describe them too
// (text_input BYTES [1] in, text_output BYTES [-1] out), and ModelInfer on one says to use ModelStreamInfer.
// Thread-safety: gRPC calls handlers concurrently; the service holds only immutable pointers.
#pragma once

#include <string>

#include "grpc_service.grpc.pb.h"
#include "server/hub/model_hub.h"
#include "server/core/pending_inference.h"

namespace sluice {

// UNAUTHENTICATED unless the call carries "authorization: Bearer <token>"; OK when `bearer_token` is empty.
// Shared by every gRPC service on the port (KServe v2, Riva ASR).
grpc::Status CheckGrpcBearer(const grpc::CallbackServerContext* context, const std::string& bearer_token);

class InferenceGrpcService final : public inference::GRPCInferenceService::CallbackService {
 public:
  // `hub` must outlive the service. Empty `bearer_token`: no authorization check.
  InferenceGrpcService(ModelHub* hub, std::string bearer_token);

  grpc::ServerUnaryReactor* ServerLive(grpc::CallbackServerContext* context, const inference::ServerLiveRequest*,
                                       inference::ServerLiveResponse* response) override;
  grpc::ServerUnaryReactor* ServerReady(grpc::CallbackServerContext* context, const inference::ServerReadyRequest*,
                                        inference::ServerReadyResponse* response) override;
  grpc::ServerUnaryReactor* ModelReady(grpc::CallbackServerContext* context, const inference::ModelReadyRequest*,
                                       inference::ModelReadyResponse* response) override;
  grpc::ServerUnaryReactor* ServerMetadata(grpc::CallbackServerContext* context,
                                           const inference::ServerMetadataRequest*,
                                           inference::ServerMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelMetadata(grpc::CallbackServerContext* context,
                                          const inference::ModelMetadataRequest* request,
                                          inference::ModelMetadataResponse* response) override;
  grpc::ServerUnaryReactor* ModelInfer(grpc::CallbackServerContext* context,
                                       const inference::ModelInferRequest* request,
                                       inference::ModelInferResponse* response) override;
  grpc::ServerUnaryReactor* ModelConfig(grpc::CallbackServerContext* context,
                                        const inference::ModelConfigRequest* request,
                                        inference::ModelConfigResponse* response) override;
  grpc::ServerUnaryReactor* ModelStatistics(grpc::CallbackServerContext* context,
                                            const inference::ModelStatisticsRequest* request,
                                            inference::ModelStatisticsResponse* response) override;
  // Triton's decoupled streaming for text-generation models (server/llm/frontend/triton_stream.h).
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      grpc::CallbackServerContext* context) override;

 private:
  // UNAUTHENTICATED unless the call carries "authorization: Bearer <token>" (when a token is configured).
  grpc::Status CheckAuth(grpc::CallbackServerContext* context) const;
  grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const grpc::Status& status);

  ModelHub* const hub_;
  const std::string bearer_token_;
};

// gRPC and absl share status code numbers.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace sluice
