#include "loadtest/kserve/infer_client.h"

#include "absl/strings/str_cat.h"
#include "loadtest/kserve/call_proto.h"
#include "loadtest/kserve/grpc_infer_client.h"
#include "loadtest/kserve/http_infer_client.h"

namespace sluice::loadtest {

absl::StatusOr<std::unique_ptr<InferClient>> InferClient::Create(const Options& options) {
  if (options.address.empty() || options.address.find(':') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("server address '", options.address, "' is not host:port"));
  }
  if (options.protocol == "grpc") return std::make_unique<GrpcInferClient>(options);
  if (options.protocol == "http") return std::make_unique<HttpInferClient>(options);
  return absl::InvalidArgumentError(absl::StrCat("protocol '", options.protocol, "' is neither grpc nor http"));
}

grpc::Status InferClient::Infer(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline,
                                inference::ModelInferResponse* response) {
  const Outcome outcome = SendAndWait(CallFromRequest(request), deadline);
  if (!outcome.ok()) return grpc::Status(static_cast<grpc::StatusCode>(outcome.code), outcome.message);
  response->set_model_name(request.model_name());
  response->set_id(request.id());
  OutputsToResponse(outcome, *response);
  return grpc::Status::OK;
}

}  // namespace sluice::loadtest
