#include "loadtest/kserve/infer_client.h"

#include "absl/strings/str_cat.h"
#include "backend/base/sync.h"
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
  Mutex mu;
  CondVar answered;
  bool done = false;  // guarded by mu
  grpc::Status result;
  Send(std::move(request), deadline,
       [&](const grpc::Status& status, const inference::ModelInferResponse& answer) {
         MutexLock lock(&mu);
         result = status;
         if (status.ok()) *response = answer;
         done = true;
         answered.Signal();  // under mu: this frame (mu, answered) may end as soon as mu is released
       });
  MutexLock lock(&mu);
  while (!done) answered.Wait(&mu);
  return result;
}

std::string GrpcCodeName(int code) {
  static const char* const kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
                                       "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
                                       "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"};
  if (code == -1) return "CLIENT_DROPPED";
  if (code == kUsageMismatchCode) return "USAGE_MISMATCH";
  if (code >= 0 && code < static_cast<int>(std::size(kNames))) return kNames[code];
  return absl::StrCat("CODE_", code);
}

}  // namespace sluice::loadtest
