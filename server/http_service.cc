#include "server/http_service.h"

#include <sys/socket.h>

#include <future>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/http_codec.h"
#include "server/status_mapping.h"

namespace sluice {
namespace {

constexpr char kJson[] = "application/json";
// Debian's cpp-httplib is a compiled library that listens with a backlog of 5: a burst of connects (a load test,
// perf_analyzer, a drain test) overflows it and the kernel drops SYNs, which clients retry only after 1 s.
constexpr int kListenBacklog = 512;

void SendError(httplib::Response& res, const absl::Status& status) {
  res.status = HttpStatusFor(status);
  if (status.code() == absl::StatusCode::kResourceExhausted) res.set_header("Retry-After", "1");
  res.set_content(ErrorJson(std::string(status.message())), kJson);
}

// Model name and optional version from a route matched as /v2/models/{m}[/versions/{v}]...
absl::StatusOr<ServedModel*> FindModel(ModelHub& hub, const httplib::Request& req) {
  return hub.Find(req.matches[1].str(), req.matches.size() > 2 ? req.matches[2].str() : "");
}

void Infer(ModelHub& hub, const httplib::Request& req, httplib::Response& res) {
  absl::StatusOr<ServedModel*> model = FindModel(hub, req);
  if (!model.ok()) return SendError(res, model.status());
  // Refused before Submit: counted once for the model, then answered.
  auto refuse = [&](const absl::Status& status) {
    (*model)->RecordRefused(status);
    SendError(res, status);
  };
  if (hub.draining()) return refuse(absl::UnavailableError("server is draining; not accepting requests"));
  std::optional<size_t> header_length;
  if (req.has_header("Inference-Header-Content-Length")) {
    const std::string text = req.get_header_value("Inference-Header-Content-Length");
    char* end = nullptr;
    const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0') {
      return refuse(absl::InvalidArgumentError("Inference-Header-Content-Length is not a number"));
    }
    header_length = value;
  }
  absl::StatusOr<HttpInferRequest> request = DecodeHttpInfer(req.body, header_length, absl::Now());
  if (!request.ok()) return refuse(request.status());
  absl::StatusOr<std::vector<size_t>> selected = SelectOutputs((*model)->config(), request->requested_outputs);
  if (!selected.ok()) return refuse(selected.status());
  absl::StatusOr<ValidatedRequest> validated = ValidateRequest((*model)->config(), request->inputs);
  if (!validated.ok()) return refuse(validated.status());
  std::promise<absl::StatusOr<std::vector<HostTensor>>> promise;
  std::future<absl::StatusOr<std::vector<HostTensor>>> answer = promise.get_future();
  absl::StatusOr<std::shared_ptr<PendingInference>> pending =
      (*model)->Submit(*std::move(validated), request->options,
                       [&promise](absl::StatusOr<std::vector<HostTensor>> outputs) {
                         promise.set_value(std::move(outputs));
                       });
  if (!pending.ok()) return SendError(res, pending.status());
  absl::StatusOr<std::vector<HostTensor>> outputs = answer.get();
  if (!outputs.ok()) return SendError(res, outputs.status());
  HttpBody body = EncodeHttpInfer((*model)->config(), *request, *selected, *outputs);
  if (body.header_length) {
    res.set_header("Inference-Header-Content-Length", std::to_string(*body.header_length));
    res.set_content(std::move(body.body), "application/octet-stream");
  } else {
    res.set_content(std::move(body.body), kJson);
  }
}

using Handler = void (*)(ModelHub&, const httplib::Request&, httplib::Response&);
struct Route {
  const char* method;
  const char* pattern;
  Handler handler;
};

#define SLUICE_MODEL "/v2/models/([^/]+)(?:/versions/([^/]+))?"
// Every route, in one table.
const Route kRoutes[] = {
    {"GET", "/v2/health/live", [](ModelHub&, const httplib::Request&, httplib::Response& res) {
       res.set_content("{\"live\":true}", kJson);
     }},
    {"GET", "/v2/health/ready", [](ModelHub& hub, const httplib::Request&, httplib::Response& res) {
       if (!hub.ready()) return SendError(res, absl::UnavailableError("not ready (loading or draining)"));
       res.set_content("{\"ready\":true}", kJson);
     }},
    {"GET", "/v2", [](ModelHub&, const httplib::Request&, httplib::Response& res) {
       res.set_content(R"({"name":"sluice","version":"0.1.0","extensions":["model_configuration","statistics",)"
                       R"("schedule_policy","binary_tensor_data"]})", kJson);
     }},
    {"GET", "/metrics", [](ModelHub& hub, const httplib::Request&, httplib::Response& res) {
       if (hub.metrics() == nullptr) return SendError(res, absl::NotFoundError("metrics are not enabled"));
       res.set_content(hub.metrics()->Render(absl::Now()), "text/plain; version=0.0.4");
     }},
    {"GET", "/v2/models/stats", [](ModelHub& hub, const httplib::Request&, httplib::Response& res) {
       std::vector<std::pair<const ModelConfig*, ModelStatsSnapshot>> all;
       for (const auto& model : hub.models()) all.emplace_back(&model->config(), model->stats().Snapshot());
       res.set_content(ModelStatsJson(all), kJson);
     }},
    {"GET", SLUICE_MODEL, [](ModelHub& hub, const httplib::Request& req, httplib::Response& res) {
       absl::StatusOr<ServedModel*> model = FindModel(hub, req);
       if (!model.ok()) return SendError(res, model.status());
       res.set_content(ModelMetadataJson((*model)->config()), kJson);
     }},
    {"GET", SLUICE_MODEL "/ready", [](ModelHub& hub, const httplib::Request& req, httplib::Response& res) {
       absl::StatusOr<ServedModel*> model = FindModel(hub, req);
       if (!model.ok()) return SendError(res, model.status());
       if (!hub.ready()) return SendError(res, absl::UnavailableError("model not ready (loading or draining)"));
       res.set_content("{\"ready\":true}", kJson);
     }},
    {"GET", SLUICE_MODEL "/config", [](ModelHub& hub, const httplib::Request& req, httplib::Response& res) {
       absl::StatusOr<ServedModel*> model = FindModel(hub, req);
       if (!model.ok()) return SendError(res, model.status());
       res.set_content(ModelConfigJson((*model)->config()), kJson);
     }},
    {"GET", SLUICE_MODEL "/stats", [](ModelHub& hub, const httplib::Request& req, httplib::Response& res) {
       absl::StatusOr<ServedModel*> model = FindModel(hub, req);
       if (!model.ok()) return SendError(res, model.status());
       res.set_content(ModelStatsJson({{&(*model)->config(), (*model)->stats().Snapshot()}}), kJson);
     }},
    {"POST", SLUICE_MODEL "/infer", Infer},
};
#undef SLUICE_MODEL

}  // namespace

absl::StatusOr<std::unique_ptr<HttpService>> HttpService::Start(const HttpServiceOptions& options) {
  std::unique_ptr<HttpService> service(new HttpService());
  if (!options.tls_cert_path.empty()) {
    service->server_ = std::make_unique<httplib::SSLServer>(options.tls_cert_path.c_str(),
                                                            options.tls_key_path.c_str());
  } else {
    service->server_ = std::make_unique<httplib::Server>();
  }
  httplib::Server& server = *service->server_;
  if (!server.is_valid()) return absl::InvalidArgumentError("cannot set up the HTTP server (TLS cert/key?)");
  ModelHub* hub = options.hub;
  for (const Route& route : kRoutes) {
    auto handler = [hub, h = route.handler](const httplib::Request& req, httplib::Response& res) {
      h(*hub, req, res);
    };
    if (std::string_view(route.method) == "GET") {
      server.Get(route.pattern, handler);
    } else {
      server.Post(route.pattern, handler);
    }
  }
  server.set_payload_max_length(static_cast<size_t>(options.max_body_bytes));
  // httplib writes a response's headers and body separately: without TCP_NODELAY, Nagle holds the body until
  // the client's delayed ACK (~40 ms per request on Linux).
  server.set_tcp_nodelay(true);
  // httplib closes a keep-alive connection after 5 requests by default: clients (perf_analyzer, load balancers)
  // would reconnect every fifth request.
  server.set_keep_alive_max_count(1000);
  server.new_task_queue = [] { return new httplib::ThreadPool(64); };
  const std::string token = options.bearer_token;
  server.set_pre_routing_handler([token](const httplib::Request& req, httplib::Response& res) {
    if (token.empty() || absl::StartsWith(req.path, "/v2/health/")) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + token) return httplib::Server::HandlerResponse::Unhandled;
    SendError(res, absl::UnauthenticatedError(req.has_header("Authorization") ? "invalid bearer token"
                                                                               : "missing 'Authorization: Bearer' header"));
    return httplib::Server::HandlerResponse::Handled;
  });
  const int64_t limit = options.max_body_bytes;
  server.set_error_handler([limit](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 413 && absl::StartsWith(req.get_header_value("Content-Type"),
                                              "application/x-www-form-urlencoded")) {
      // cpp-httplib caps form-encoded bodies at 8 KiB (a build-time constant), whatever our limit; curl -d
      // sends that content type by default.
      res.set_content(ErrorJson("form-encoded bodies are limited to 8192 bytes; send the KServe v2 JSON body with "
                                "'Content-Type: application/json' (or the binary-data extension)"),
                      kJson);
    } else if (res.status == 413) {
      res.set_content(ErrorJson(absl::StrCat("request body is over the limit of ", limit, " bytes")), kJson);
    } else if (res.status == 404) {
      res.set_content(ErrorJson(absl::StrCat("no route for ", req.method, " ", req.path)), kJson);
    } else {
      res.set_content(ErrorJson(absl::StrCat("HTTP error ", res.status)), kJson);
    }
  });
  const size_t colon = options.address.rfind(':');
  const std::string host = options.address.substr(0, colon);
  const int port = std::stoi(options.address.substr(colon + 1));
  HttpService* raw = service.get();
  server.set_socket_options([raw](socket_t socket) {
    httplib::default_socket_options(socket);
    raw->listen_socket_ = socket;
  });
  service->port_ = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (service->port_ <= 0) return absl::UnavailableError(absl::StrCat("cannot listen for HTTP on ", options.address));
  // listen() again on the listening socket only raises its backlog (Linux); the accept loop has not started.
  if (service->listen_socket_ >= 0 && ::listen(service->listen_socket_, kListenBacklog) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot raise the HTTP listen backlog on ", options.address));
  }
  service->thread_ = std::thread([&server] { server.listen_after_bind(); });
  return service;
}

void HttpService::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpService::~HttpService() { Stop(); }

}  // namespace sluice
