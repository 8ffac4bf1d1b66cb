#include "loadtest/kserve/http_infer_client.h"

#include <google/protobuf/util/json_util.h>
#include <httplib.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backend/base/status_mapping.h"
#include "loadtest/kserve/call_proto.h"
#include "loadtest/kserve/kserve_http.h"

namespace sluice::loadtest {
namespace {

constexpr auto kControlTimeout = std::chrono::seconds(10);

std::unique_ptr<httplib::Client> Connect(const std::string& address) {
  auto client = std::make_unique<httplib::Client>(absl::StrCat("http://", address));
  client->set_keep_alive(true);
  client->set_tcp_nodelay(true);  // headers and body go out in separate writes: no Nagle wait between them
  client->set_connection_timeout(kControlTimeout);
  return client;
}

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

HttpInferClient::HttpInferClient(const Options& options) : InferClient(options) {}

HttpInferClient::~HttpInferClient() {
  CancelAll();
  WaitIdle(absl::Seconds(30));
  std::vector<std::thread> workers;
  {
    MutexLock lock(&mu_);
    stop_ = true;
    work_.SignalAll();
    workers.swap(workers_);
  }
  for (std::thread& worker : workers) worker.join();
}

void HttpInferClient::Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) {
  MutexLock lock(&mu_);
  ++in_flight_;
  queue_.push_back({std::move(call), deadline, std::move(done)});
  work_.Signal();
  if (static_cast<int>(queue_.size()) > idle_workers_ &&
      static_cast<int>(workers_.size()) < std::max(1, options_.max_connections)) {
    // Started under mu_ so that workers_.size() counts it at once; the thread takes mu_ before touching state.
    workers_.emplace_back([this] { WorkerLoop(); });
  }
}

void HttpInferClient::WorkerLoop() {
  std::unique_ptr<httplib::Client> client = Connect(options_.address);
  {
    MutexLock lock(&mu_);
    connections_.insert(client.get());
  }
  while (true) {
    Job job;
    uint64_t epoch;
    {
      MutexLock lock(&mu_);
      ++idle_workers_;
      while (!stop_ && queue_.empty()) work_.Wait(&mu_);
      --idle_workers_;
      if (queue_.empty()) {  // stopping
        connections_.erase(client.get());
        return;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      epoch = cancel_epoch_.load();
    }
    job.done(Execute(*client, job, epoch));
    MutexLock lock(&mu_);
    if (--in_flight_ == 0) idle_.SignalAll();
  }
}

Outcome HttpInferClient::Execute(httplib::Client& client, const Job& job, uint64_t epoch) {
  const inference::ModelInferRequest request = RequestFromCall(job.call);
  inference::ModelInferResponse response;
  const grpc::Status status = InferOverHttp(client, request, job.deadline, epoch, &response);
  return OutcomeFromResponse(status, response);
}

grpc::Status HttpInferClient::InferOverHttp(httplib::Client& client, const inference::ModelInferRequest& request,
                                            std::chrono::system_clock::time_point deadline, uint64_t epoch,
                                            inference::ModelInferResponse* response) {
  if (cancel_epoch_.load() != epoch) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
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
    if (cancel_epoch_.load() != epoch) return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
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

void HttpInferClient::CancelAll() {
  std::vector<Job> queued;
  std::vector<httplib::Client*> running;
  {
    MutexLock lock(&mu_);
    cancel_epoch_.fetch_add(1);
    for (Job& job : queue_) queued.push_back(std::move(job));
    queue_.clear();
    running.assign(connections_.begin(), connections_.end());
  }
  // Outside mu_: httplib's stop() shuts the socket of a request in flight from another thread (its own lock);
  // an idle connection is closed and reopened by the next call. Workers and their connections live until the
  // destructor, which calls CancelAll before stopping them.
  for (httplib::Client* client : running) client->stop();
  for (Job& job : queued) {
    job.done(Outcome::Ended(grpc::StatusCode::CANCELLED, "cancelled by the client"));
    MutexLock lock(&mu_);
    if (--in_flight_ == 0) idle_.SignalAll();
  }
}

bool HttpInferClient::WaitIdle(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  MutexLock lock(&mu_);
  while (in_flight_ > 0) {
    if (absl::Now() >= deadline) return false;
    idle_.WaitUntil(&mu_, deadline);
  }
  return true;
}

int64_t HttpInferClient::in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

grpc::Status HttpInferClient::GetJson(const std::string& path, google::protobuf::Message* message) {
  std::unique_ptr<httplib::Client> client = Connect(options_.address);
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
