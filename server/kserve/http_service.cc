#include "server/kserve/http_service.h"

#include <string_view>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/base/sync.h"
#include "absl/time/clock.h"
#include "backend/base/status_mapping.h"
#include "server/kserve/bearer_auth.h"
#include "server/kserve/http_codec.h"
#include "server/http/http_server.h"
#include "server/llm/frontend/openai_service.h"
#include "server/kserve/model_descriptions.h"
#include "server/kserve/model_lookup.h"
#include "server/core/pending_inference.h"
#include "server/kserve/proto_json.h"

namespace sluice {
namespace {

// What a handler gets: the hub, the request (a handler may take its body), where to answer, the
// {model}/{version} the route matched, and the service's options (the transcription handler).
struct RouteContext {
  ModelHub& hub;
  HttpRequest& request;
  const std::shared_ptr<HttpExchange>& exchange;
  std::string model;
  std::string version;
  const HttpServiceOptions& options;
};

void SendJson(HttpExchange& exchange, int status, std::string body) {
  HttpResponse response;
  response.status = status;
  response.body = std::move(body);
  exchange.Respond(std::move(response));
}

void SendError(HttpExchange& exchange, const absl::Status& status) {
  HttpResponse response;
  response.status = HttpStatusFor(status);
  if (status.code() == absl::StatusCode::kResourceExhausted) response.headers.emplace_back("Retry-After", "1");
  response.body = ErrorJson(status.message());
  exchange.Respond(std::move(response));
}

void SendMessage(HttpExchange& exchange, const google::protobuf::Message& message) {
  SendJson(exchange, 200, ProtoToKserveJson(message));
}

absl::StatusOr<ServedModel*> FindModel(const RouteContext& c) { return c.hub.Find(c.model, c.version); }

// The binary-data extension's header length: a plain decimal byte count, or an error naming the header.
absl::StatusOr<std::optional<size_t>> BinaryHeaderLength(const HttpRequest& request) {
  std::optional<std::string_view> header = request.Header("Inference-Header-Content-Length");
  if (!header) return std::optional<size_t>();
  const absl::string_view text(header->data(), header->size());
  uint64_t value = 0;
  if (text.empty() || !absl::SimpleAtoi(text, &value) || text.front() == '+' || text.front() == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat("Inference-Header-Content-Length '", text, "' is not a byte count"));
  }
  return std::optional<size_t>(value);
}

// Withdraws an accepted infer's queued rows when its client disconnects.
class InferWithdrawal {
 public:
  void Set(InferHandle handle) {
    sluice::MutexLock lock(&mu_);
    handle_ = std::move(handle);
  }
  void Withdraw() {
    InferHandle handle;
    {
      sluice::MutexLock lock(&mu_);
      handle = handle_;
    }
    handle.Cancel();  // may answer rows on this thread: no lock held
  }

 private:
  sluice::Mutex mu_;
  InferHandle handle_ ABSL_GUARDED_BY(mu_);
};

void Infer(RouteContext& c) {
  absl::StatusOr<ServedModel*> model = FindInferModel(c.hub, c.model, c.version);
  if (!model.ok()) return SendError(*c.exchange, model.status());
  absl::StatusOr<std::optional<size_t>> header_length = BinaryHeaderLength(c.request);
  absl::StatusOr<HttpInferCall> decoded =
      header_length.ok() ? DecodeHttpInfer(c.request.body, *header_length) : header_length.status();
  absl::StatusOr<InferCall> call = absl::UnknownError("not decoded");
  std::vector<std::optional<bool>> binary_output;
  if (!decoded.ok()) {
    call = decoded.status();
  } else {
    call = std::move(decoded->call);
    binary_output = std::move(decoded->binary_output);
  }
  const std::string id = call.ok() ? call->id : "";
  ServedModel* served = *model;
  InferHandle handle = served->Infer(
      std::move(call), [exchange = c.exchange, served, id, binary_output](absl::StatusOr<InferResult> result) {
        if (!result.ok()) return SendError(*exchange, result.status());
        HttpBody body = EncodeHttpInfer(served->config(), id, binary_output, *result);
        HttpResponse response;
        if (body.header_length) {
          response.headers.emplace_back("Inference-Header-Content-Length", std::to_string(*body.header_length));
          response.content_type = "application/octet-stream";
        }
        response.body = std::move(body.body);
        exchange->Respond(std::move(response));
      });
  auto withdrawal = std::make_shared<InferWithdrawal>();
  withdrawal->Set(std::move(handle));
  c.exchange->OnClientGone([withdrawal] { withdrawal->Withdraw(); });
}

void ModelMetadata(RouteContext& c) {
  inference::ModelMetadataResponse metadata;
  if (absl::Status found = DescribeModel(c.hub, c.model, c.version, metadata); !found.ok()) {
    return SendError(*c.exchange, found);
  }
  SendMessage(*c.exchange, metadata);
}

void ModelReady(RouteContext& c) {
  absl::StatusOr<bool> ready = ModelIsReady(c.hub, c.model, c.version);
  if (!ready.ok()) return SendError(*c.exchange, ready.status());
  if (!*ready) {
    return SendError(*c.exchange, absl::UnavailableError(c.hub.ready() ? "model not ready: no instance left in rotation"
                                                                        : "model not ready (draining)"));
  }
  SendJson(*c.exchange, 200, R"({"ready":true})");
}

void ModelConfig(RouteContext& c) {
  inference::ModelConfig config;
  if (absl::Status found = DescribeModelConfig(c.hub, c.model, c.version, config); !found.ok()) {
    return SendError(*c.exchange, found);
  }
  SendMessage(*c.exchange, config);
}

void ModelStatistics(RouteContext& c) {
  inference::ModelStatisticsResponse response;
  if (c.model.empty()) {  // every model
    for (const auto& model : c.hub.models()) {
      FillModelStatistics(model->config(), model->stats().Snapshot(), *response.add_model_stats());
    }
    return SendMessage(*c.exchange, response);
  }
  absl::StatusOr<ServedModel*> model = FindModel(c);
  if (!model.ok()) return SendError(*c.exchange, model.status());
  FillModelStatistics((*model)->config(), (*model)->stats().Snapshot(), *response.add_model_stats());
  SendMessage(*c.exchange, response);
}

void ServerReady(RouteContext& c) {
  if (!c.hub.ready()) return SendError(*c.exchange, absl::UnavailableError("not ready (loading or draining)"));
  SendJson(*c.exchange, 200, R"({"ready":true})");
}

void ServerMetadata(RouteContext& c) {
  inference::ServerMetadataResponse metadata;
  FillServerMetadata(metadata);
  SendMessage(*c.exchange, metadata);
}

void Metrics(RouteContext& c) {
  if (c.hub.metrics() == nullptr) return SendError(*c.exchange, absl::NotFoundError("metrics are not enabled"));
  HttpResponse response;
  response.content_type = "text/plain; version=0.0.4";
  response.body = c.hub.metrics()->Render(absl::Now());
  c.exchange->Respond(std::move(response));
}

struct Route {
  const char* method;
  const char* pattern;  // literal segments, {model}; a {model} may be followed by /versions/{version}
  void (*handler)(RouteContext&);
  bool needs_auth;
};

// Every route, in one table; the first match wins.
const Route kRoutes[] = {
    {"GET", "/v2/health/live", [](RouteContext& c) { SendJson(*c.exchange, 200, R"({"live":true})"); }, false},
    {"GET", "/v2/health/ready", ServerReady, false},
    {"GET", "/v2", ServerMetadata, true},
    {"GET", "/metrics", Metrics, true},
    {"GET", "/v2/models/stats", ModelStatistics, true},
    {"GET", "/v2/models/{model}", ModelMetadata, true},
    {"GET", "/v2/models/{model}/ready", ModelReady, true},
    {"GET", "/v2/models/{model}/config", ModelConfig, true},
    {"GET", "/v2/models/{model}/stats", ModelStatistics, true},
    {"POST", "/v2/models/{model}/infer", Infer, true},
    // OpenAI-compatible generation (server/llm/frontend/openai_service.h); their errors are in OpenAI's shape.
    {"POST", "/v1/completions",
     [](RouteContext& c) { ServeOpenAiGeneration(c.hub, OpenAiEndpoint::kCompletions, c.request, c.exchange); },
     true},
    {"POST", "/v1/chat/completions",
     [](RouteContext& c) { ServeOpenAiGeneration(c.hub, OpenAiEndpoint::kChat, c.request, c.exchange); }, true},
    {"POST", "/v1/embeddings", [](RouteContext& c) { ServeOpenAiEmbeddings(c.hub, c.request, c.exchange); }, true},
    {"GET", "/v1/models", [](RouteContext& c) { ServeOpenAiModels(c.hub, c.exchange); }, true},
    // OpenAI speech to text for the voice models (server/voice/openai_transcriptions.h).
    {"POST", "/v1/audio/transcriptions",
     [](RouteContext& c) {
       if (!c.options.transcriptions) {
         return SendOpenAiError(*c.exchange, absl::NotFoundError("this server has no voice service"));
       }
       c.options.transcriptions(c.request, c.exchange);
     },
     true},
};

// The segments of a path ("/v2/models/m" -> v2, models, m).
std::vector<absl::string_view> PathSegments(absl::string_view path) {
  return absl::StrSplit(path.substr(path.empty() ? 0 : 1), '/');
}

// Matches a request path, split once into `got`, against a route pattern, filling the model name and version.
bool MatchPath(absl::string_view pattern, const std::vector<absl::string_view>& got, std::string& model,
               std::string& version) {
  const std::vector<absl::string_view> want = PathSegments(pattern);
  size_t g = 0;
  for (size_t w = 0; w < want.size(); ++w, ++g) {
    if (g >= got.size()) return false;
    if (want[w] != "{model}") {
      if (want[w] != got[g]) return false;
      continue;
    }
    if (got[g].empty()) return false;
    model = std::string(got[g]);
    if (g + 2 < got.size() && got[g + 1] == "versions") {  // /versions/{version} follows the model
      version = std::string(got[g + 2]);
      g += 2;
    }
  }
  return g == got.size();
}

void Route(const HttpServiceOptions& options, HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
  ModelHub& hub = *options.hub;
  const std::string& token = options.bearer_token;
  // The OpenAI routes answer their errors (auth, 404, 405 included) in OpenAI's shape.
  const bool openai = absl::StartsWith(request.path, "/v1/");
  auto send_error = [&](const absl::Status& status) {
    openai ? SendOpenAiError(*exchange, status) : SendError(*exchange, status);
  };
  bool path_known = false;
  const std::vector<absl::string_view> segments = PathSegments(request.path);
  for (const auto& route : kRoutes) {
    RouteContext context{hub, request, exchange, "", "", options};
    if (!MatchPath(route.pattern, segments, context.model, context.version)) continue;
    path_known = true;
    if (request.method != route.method) continue;
    if (route.needs_auth) {
      if (absl::Status auth = CheckBearer(request.Header("Authorization"), token); !auth.ok()) {
        return send_error(auth);
      }
    }
    return route.handler(context);
  }
  if (path_known) {
    const std::string message = absl::StrCat("method ", request.method, " is not allowed for ", request.path);
    return SendJson(*exchange, 405, openai ? OpenAiErrorJson(absl::InvalidArgumentError(message)) : ErrorJson(message));
  }
  send_error(absl::NotFoundError(absl::StrCat("no route for ", request.method, " ", request.path)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpService>> HttpService::Start(const HttpServiceOptions& options) {
  HttpServerOptions server;
  server.address = options.address;
  server.threads = static_cast<int>(options.http.threads);
  server.limits.max_connections = static_cast<int>(options.http.max_connections);
  server.limits.max_header_bytes = options.http.max_header_bytes;
  server.limits.max_body_bytes = options.max_body_bytes;
  server.limits.header_timeout = absl::Milliseconds(options.http.header_timeout_ms);
  server.limits.body_timeout = absl::Milliseconds(options.http.body_timeout_ms);
  server.limits.idle_timeout = absl::Milliseconds(options.http.idle_timeout_ms);
  server.tls_cert_path = options.tls_cert_path;
  server.tls_key_path = options.tls_key_path;
  auto shared = std::make_shared<const HttpServiceOptions>(options);
  absl::StatusOr<std::unique_ptr<HttpServer>> started =
      HttpServer::Start(server, [shared](HttpRequest request, std::shared_ptr<HttpExchange> exchange) {
        Route(*shared, std::move(request), std::move(exchange));
      });
  if (!started.ok()) return started.status();
  std::unique_ptr<HttpService> service(new HttpService());
  service->server_ = *std::move(started);
  return service;
}

int HttpService::port() const { return server_ ? server_->port() : 0; }

void HttpService::Stop() {
  if (server_) server_->Stop();
}

HttpService::~HttpService() { Stop(); }

}  // namespace sluice
