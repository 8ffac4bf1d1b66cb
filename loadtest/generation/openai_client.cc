#include "loadtest/generation/openai_client.h"

#include <httplib.h>

#include <rapidjson/document.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/base/status_mapping.h"
#include "loadtest/generation/openai_stream.h"

namespace sluice::loadtest {
namespace {

using Clock = std::chrono::steady_clock;

httplib::Headers Headers(const std::string& bearer_token) {
  httplib::Headers headers;
  if (!bearer_token.empty()) headers.emplace("Authorization", "Bearer " + bearer_token);
  headers.emplace("Accept", "text/event-stream");
  return headers;
}

Outcome Failed(int code, std::string message) { return Outcome::Ended(code, std::move(message)); }

}  // namespace

OpenAiInferClient::OpenAiInferClient(const Options& options, const GenerationPlan* plan)
    : InferClient(options),
      plan_(plan),
      pool_(options.address, options.max_connections,
            [this](httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch) {
              return Execute(client, job, epoch);
            }) {}

Outcome OpenAiInferClient::Execute(httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch) {
  if (pool_.cancelled(epoch)) return Failed(grpc::StatusCode::CANCELLED, "cancelled by the client");
  absl::StatusOr<GenerationSpec> spec = GenerationSpecOfCall(job.call, plan_);
  if (!spec.ok()) return Failed(grpc::StatusCode::INVALID_ARGUMENT, std::string(spec.status().message()));
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(job.deadline -
                                                                          std::chrono::system_clock::now());
  if (left.count() <= 0) return Failed(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed in the client");
  const auto wait = std::chrono::ceil<std::chrono::milliseconds>(left);
  client.set_read_timeout(wait);
  client.set_write_timeout(wait);

  httplib::Request request;
  request.method = "POST";
  request.path = OpenAiPath(*spec);
  request.headers = Headers(options_.bearer_token);
  request.body = EncodeOpenAiCompletionBody(*spec);
  request.set_header("Content-Type", "application/json");
  int http_status = 0;
  std::string error_body;
  OpenAiStreamState state;
  const Clock::time_point sent = Clock::now();
  request.response_handler = [&http_status](const httplib::Response& r) {
    http_status = r.status;
    return true;
  };
  request.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    if (http_status != 200) {
      if (error_body.size() < 4096) error_body.append(data, length);
      return true;
    }
    state.Feed(absl::string_view(data, length), std::chrono::duration<double>(Clock::now() - sent).count());
    // httplib's read timeout bounds each wait, not the whole stream: give up at the deadline.
    return std::chrono::system_clock::now() <= job.deadline;
  };
  httplib::Response http_response;
  httplib::Error error = httplib::Error::Success;
  const bool sent_ok = client.send(request, http_response, error);
  if (!sent_ok && !(error == httplib::Error::Canceled && http_status == 200)) {
    if (pool_.cancelled(epoch)) return Failed(grpc::StatusCode::CANCELLED, "cancelled by the client");
    if (std::chrono::system_clock::now() + std::chrono::milliseconds(1) >= job.deadline) {
      return Failed(grpc::StatusCode::DEADLINE_EXCEEDED, "the stream did not end before the deadline");
    }
    if (http_status == 0 || http_status == 200) {
      return Failed(grpc::StatusCode::UNAVAILABLE, absl::StrCat("HTTP: ", httplib::to_string(error)));
    }
  }
  if (http_status != 200) {
    return Failed(static_cast<grpc::StatusCode>(StatusCodeForHttp(http_status)),
                        absl::StrCat("HTTP ", http_status, ": ", OpenAiErrorMessage(error_body)));
  }
  if (std::chrono::system_clock::now() > job.deadline && !state.outcome().done) {
    return Failed(grpc::StatusCode::DEADLINE_EXCEEDED, "the stream did not end before the deadline");
  }
  return GenerationOutcomeToOutcome(state.outcome(), JudgeStream(state.outcome(), *spec));
}

absl::StatusOr<std::vector<OpenAiModelEntry>> ListOpenAiModels(const std::string& address,
                                                          const std::string& bearer_token) {
  httplib::Client client(absl::StrCat("http://", address));
  client.set_connection_timeout(std::chrono::seconds(10));
  client.set_read_timeout(std::chrono::seconds(10));
  httplib::Headers headers;
  if (!bearer_token.empty()) headers.emplace("Authorization", "Bearer " + bearer_token);
  httplib::Result result = client.Get("/v1/models", headers);
  if (!result) {
    return absl::UnavailableError(absl::StrCat("GET http://", address, "/v1/models: ",
                                               httplib::to_string(result.error())));
  }
  if (result->status != 200) {
    return absl::UnavailableError(absl::StrCat("GET /v1/models: HTTP ", result->status, ": ",
                                               OpenAiErrorMessage(result->body)));
  }
  rapidjson::Document doc;
  doc.Parse(result->body.data(), result->body.size());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("data") || !doc["data"].IsArray()) {
    return absl::DataLossError("GET /v1/models: not an OpenAI model list");
  }
  std::vector<OpenAiModelEntry> models;
  for (const auto& m : doc["data"].GetArray()) {
    if (!m.IsObject() || !m.HasMember("id") || !m["id"].IsString()) continue;
    OpenAiModelEntry& entry = models.emplace_back();
    entry.id = m["id"].GetString();
    auto limit = [&m](const char* key) -> int64_t {
      return m.HasMember(key) && m[key].IsInt64() && m[key].GetInt64() > 0 ? m[key].GetInt64() : 0;
    };
    entry.max_model_len = limit("max_model_len");
    entry.vocab_size = limit("vocab_size");
    entry.max_prompt_tokens = limit("max_prompt_tokens");
  }
  return models;
}

absl::StatusOr<OpenAiModelEntry> DescribeOpenAiModel(const std::string& address, const std::string& bearer_token,
                                                     const std::string& model) {
  absl::StatusOr<std::vector<OpenAiModelEntry>> models = ListOpenAiModels(address, bearer_token);
  if (!models.ok()) return absl::UnavailableError(models.status().message());
  std::vector<std::string> names;
  for (const OpenAiModelEntry& entry : *models) {
    if (entry.id == model) return entry;
    names.push_back(entry.id);
  }
  return absl::NotFoundError(absl::StrCat("model ", model, " is not among the server's /v1/models (",
                                          absl::StrJoin(names, ", "), ")"));
}

grpc::Status OpenAiInferClient::ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) {
  absl::StatusOr<OpenAiModelEntry> entry = DescribeOpenAiModel(options_.address, options_.bearer_token, model);
  if (!entry.ok()) {
    return grpc::Status(static_cast<grpc::StatusCode>(entry.status().code()), std::string(entry.status().message()));
  }
  response->set_name(model);
  return grpc::Status::OK;
}

grpc::Status OpenAiInferClient::ModelConfig(const std::string&, inference::ModelConfigResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "the OpenAI API has no model config");
}

grpc::Status OpenAiInferClient::ModelStatistics(const std::string&, inference::ModelStatisticsResponse*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "the OpenAI API has no model statistics");
}

}  // namespace sluice::loadtest
