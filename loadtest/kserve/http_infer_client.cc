#include "loadtest/kserve/http_infer_client.h"

#include <google/protobuf/util/json_util.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "backend/base/status_mapping.h"
#include "loadtest/kserve/call_proto.h"
#include "loadtest/kserve/kserve_http.h"

namespace sluice::loadtest {
namespace {

constexpr auto kControlTimeout = std::chrono::seconds(10);

httplib::Headers AuthHeaders(const std::string& bearer_token) {
  httplib::Headers headers;
  if (!bearer_token.empty()) headers.emplace("Authorization", "Bearer " + bearer_token);
  return headers;
}

grpc::Status HttpError(const httplib::Response& response) {
  // absl and gRPC status codes share their numbers.
  return grpc::Status(static_cast<grpc::StatusCode>(StatusCodeForHttp(response.status)),
                      absl::StrCat("HTTP ", response.status, ": ", HttpErrorMessage(response.body)));
}

}  // namespace

HttpInferClient::HttpInferClient(const Options& options)
    : InferClient(options),
      pool_(options.address, options.max_connections,
            [this](httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch) {
              return Execute(client, job, epoch);
            }) {}

Outcome HttpInferClient::Execute(httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch) {
  const inference::ModelInferRequest request = RequestFromCall(job.call);
  inference::ModelInferResponse response;
  const grpc::Status status = InferOverHttp(client, request, job.deadline, epoch, &response);
  return OutcomeFromResponse(status, response);
}

grpc::Status HttpInferClient::InferOverHttp(httplib::Client& client, const inference::ModelInferRequest& request,
                                            std::chrono::system_clock::time_point deadline, uint64_t epoch,
                                            inference::ModelInferResponse* response) {
  if (pool_.cancelled(epoch)) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline -
                                                                          std::chrono::system_clock::now());
  if (left.count() <= 0) return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed in the client");
  const HttpInferBody body = EncodeHttpInferRequest(request, left.count());
  // httplib polls in whole milliseconds (truncated): round the wait up, so that a timeout means a missed deadline.
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(left);
  client.set_read_timeout(wait);
  client.set_write_timeout(wait);
  httplib::Headers headers = AuthHeaders(options_.bearer_token);
  headers.emplace("Inference-Header-Content-Length", std::to_string(body.header_length));
  std::string path = absl::StrCat("/v2/models/", request.model_name());
  if (!request.model_version().empty()) absl::StrAppend(&path, "/versions/", request.model_version());
  path += "/infer";
  httplib::Result result = client.Post(path, headers, body.body, "application/octet-stream");
  if (!result) {
    if (pool_.cancelled(epoch)) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
    if (std::chrono::system_clock::now() + std::chrono::milliseconds(1) >= deadline) {  // poll's clock vs ours
      return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "no answer before the deadline");
    }
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, absl::StrCat("HTTP: ", httplib::to_string(result.error())));
  }
  // httplib's timeouts bound each poll, not the whole exchange: a large body written slowly can leave the answer
  // waiting in the socket when the deadline has already passed. A gRPC client would have given up; so does this.
  if (std::chrono::system_clock::now() > deadline) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "the answer arrived after the deadline");
  }
  if (result->status != 200) return HttpError(*result);
  std::optional<size_t> header_length;
  if (result->has_header("Inference-Header-Content-Length")) {
    header_length = std::strtoull(result->get_header_value("Inference-Header-Content-Length").c_str(), nullptr, 10);
  }
  absl::StatusOr<inference::ModelInferResponse> decoded = DecodeHttpInferResponse(result->body, header_length);
  if (!decoded.ok()) return grpc::Status(grpc::StatusCode::DATA_LOSS, std::string(decoded.status().message()));
  *response = *std::move(decoded);
  return grpc::Status::OK;
}

grpc::Status HttpInferClient::GetJson(const std::string& path, google::protobuf::Message* message) {
  std::unique_ptr<httplib::Client> client = ConnectHttp(options_.address);
  client->set_read_timeout(kControlTimeout);
  httplib::Result result = client->Get(path, AuthHeaders(options_.bearer_token));
  if (!result) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("GET ", path, ": ", httplib::to_string(result.error())));
  }
  if (result->status != 200) return HttpError(*result);
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  if (auto s = google::protobuf::util::JsonStringToMessage(result->body, message, parse); !s.ok()) {
    return grpc::Status(grpc::StatusCode::DATA_LOSS, absl::StrCat("GET ", path, ": ", s.ToString()));
  }
  return grpc::Status::OK;
}

grpc::Status HttpInferClient::ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) {
  return GetJson(absl::StrCat("/v2/models/", model), response);
}

// KServe's REST config route returns the model configuration itself; gRPC wraps it in ModelConfigResponse.
grpc::Status HttpInferClient::ModelConfig(const std::string& model, inference::ModelConfigResponse* response) {
  return GetJson(absl::StrCat("/v2/models/", model, "/config"), response->mutable_config());
}

grpc::Status HttpInferClient::ModelStatistics(const std::string& model,
                                              inference::ModelStatisticsResponse* response) {
  return GetJson(absl::StrCat("/v2/models/", model, "/stats"), response);
}

}  // namespace sluice::loadtest
