#include "server/app/server.h"

#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>
#include <thread>

#include <grpc/support/log.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "backend/base/blas_kernels.h"
#include "absl/time/clock.h"
#include "server/kserve/grpc_service.h"
#include "server/voice/openai_transcriptions.h"
#include "server/voice/riva_service.h"
#include "server/kserve/http_service.h"
#include "server/app/tls_files.h"

namespace sluice {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  return text;
}

// gRPC's own log lines (gpr_log) go through spdlog like every other line of the server. While the listener binds
// they are demoted to debug: a port in use makes gRPC print a screen of internal text, and StartGrpc reports the
// failure itself in one line naming the cause.
std::atomic<bool> grpc_binding{false};

void LogGrpcLine(gpr_log_func_args* args) {
  spdlog::level::level_enum level = spdlog::level::debug;
  if (!grpc_binding.load()) {
    level = args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
            : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                      : spdlog::level::debug;
  }
  spdlog::log(level, "grpc {}:{}: {}", args->file, args->line, args->message);
}

// gRPC logs why a listener failed but only reports "no port": find the common cause ourselves.
std::string WhyCannotBind(const std::string& address) {
  const size_t colon = address.rfind(':');
  const int port = std::atoi(address.c_str() + colon + 1);
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0 || port == 0) return "gRPC's own account is logged at log_level: debug";
  const int off = 0;
  ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
  sockaddr_in6 addr{};
  addr.sin6_family = AF_INET6;
  addr.sin6_port = htons(static_cast<uint16_t>(port));
  addr.sin6_addr = in6addr_any;
  const bool in_use = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno == EADDRINUSE;
  ::close(fd);
  return in_use ? "address already in use (is another server running?)"
                : "gRPC's own account is logged at log_level: debug";
}

// Server reflection describes the whole API to any caller, and gRPC offers no way to put it behind the token
// check: it is served only when no bearer token is configured. Linking libgrpc++_reflection registers it for
// every server (a static initializer), so the library is not linked but loaded here, only when wanted, before the
// ServerBuilder that picks up its plugin is made.
void LoadGrpcReflection() {
  if (dlopen(SLUICE_GRPC_REFLECTION_LIBRARY, RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    spdlog::warn("gRPC server reflection is off: cannot load {}: {}", SLUICE_GRPC_REFLECTION_LIBRARY, dlerror());
  }
}

void LogRepository(const ModelRepository& repository) {
  if (std::optional<std::string> blas = BlasKernelWarning(LoadedOpenBlasCore(), DetectCpuVectorUnits())) {
    spdlog::warn("{}", *blas);
  }
  for (const LoadedModel& model : repository.models()) {
    const ModelConfig& config = *model.config;
    const ModelMemory memory = MemoryOf(model);
    const size_t instances = model.instances.size() + model.generation_instances.size();
    spdlog::info("model {} memory: {}", config.name, DescribeModelMemory(memory, instances));
    if (std::string warning = GraphFormatWarning(config.name, memory); !warning.empty()) spdlog::warn("{}", warning);
    if (config.kind == ModelKind::kGeneration) {
      const GenerationOptions& g = *config.generation;
      spdlog::info("model {} (generation): {} instance(s), prompt buckets [{}], decode batch sizes [{}], KV lengths "
                   "[{}], {} sequences per instance, loaded+warmed in {:.2f} s", config.name,
                   model.generation_instances.size(), fmt::join(g.prefill_lengths, ","),
                   fmt::join(g.decode_batch_sizes, ","), fmt::join(g.kv_lengths, ","), g.max_num_seqs,
                   model.load_seconds);
      for (const auto& instance : model.generation_instances) spdlog::info("  {}", instance->Describe());
      continue;
    }
    spdlog::info("model {}: {} instance(s), lengths [{}], batch sizes [{}], loaded+warmed in {:.2f} s", config.name,
                 model.instances.size(), fmt::join(config.buckets.lengths, ","),
                 fmt::join(config.buckets.batch_sizes, ","), model.load_seconds);
    for (const auto& instance : model.generation_instances) spdlog::info("  decoder {}", instance->Describe());
    for (const auto& instance : model.instances) {
      for (const BucketLoadStats& bucket : instance->load_stats()) {
        spdlog::debug("  {} bucket b{} l{}: load {:.3f} s, warm {:.3f} s", instance->Describe(), bucket.batch_size,
                      bucket.length, bucket.load_seconds, bucket.warm_seconds);
      }
    }
    for (const auto& instance : model.stream_instances) spdlog::info("  {}", instance->Describe());
  }
}

// The decoder engine of an encoder-decoder speech model, over its generation instances (model_hub.h).
absl::StatusOr<std::unique_ptr<SpeechDecoder>> CreateSpeechDecoder(LoadedModel& loaded, ServerMetrics* metrics) {
  auto decoder = std::make_unique<SpeechDecoder>();
  decoder->config = loaded.config.get();
  ContinuousBatcherOptions options;
  options.model = loaded.config.get();
  for (auto& instance : loaded.generation_instances) options.instances.push_back(instance.get());
  if (metrics != nullptr) {
    decoder->metrics = std::make_unique<GenerationMetrics>(*loaded.config, metrics);
    options.observer = [m = decoder->metrics.get()](const GenerationStepReport& step) { m->RecordStep(step); };
  }
  absl::StatusOr<std::unique_ptr<ContinuousBatcher>> engine = ContinuousBatcher::Create(options);
  if (!engine.ok()) {
    return absl::Status(engine.status().code(), absl::StrCat("decoder engine for ", loaded.config->name, ": ",
                                                             engine.status().message()));
  }
  decoder->engine = *std::move(engine);
  if (decoder->metrics) decoder->metrics->AttachEngine(decoder->engine.get());
  return decoder;
}

}  // namespace

Server::Server(const ServerConfig& config) : config_(config), start_(absl::Now()) {
  metrics_ = std::make_unique<ServerMetrics>(start_, config_.cost);
  hub_ = std::make_unique<ModelHub>(metrics_.get());
}

Server::~Server() {
  CloseListeners();
  if (riva_service_) riva_service_->WaitForDecodes();  // a decode's tail may still use a model
  if (riva_service_) riva_service_->stream_engines().StopAll();  // their steps record into the models' statistics
  hub_.reset();  // stops the schedulers before the backends they run on go
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerConfig& config) {
  if (!config.tls_cert_path.empty()) {
    if (absl::Status tls = CheckTlsFiles(config.tls_cert_path, config.tls_key_path); !tls.ok()) return tls;
  }
  std::unique_ptr<Server> server(new Server(config));
  if (absl::Status s = server->StartGrpc(); !s.ok()) return s;
  if (absl::Status s = server->StartHttp(); !s.ok()) return s;
  return server;
}

absl::Status Server::StartGrpc() {
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!config_.tls_cert_path.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(config_.tls_cert_path), key = ReadFile(config_.tls_key_path);
    if (!cert.ok() || !key.ok()) return !cert.ok() ? cert.status() : key.status();
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::EnableDefaultHealthCheckService(true);
  if (config_.bearer_token.empty()) LoadGrpcReflection();
  grpc_service_ = std::make_unique<InferenceGrpcService>(hub_.get(), config_.bearer_token);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(config_.grpc_address, credentials, &grpc_port_);
  builder.RegisterService(grpc_service_.get());
  riva_service_ = std::make_unique<voice::RivaAsrService>(hub_.get(), config_.bearer_token, config_.voice);
  builder.RegisterService(riva_service_.get());
  builder.SetMaxReceiveMessageSize(static_cast<int>(config_.max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config_.max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(config_.keepalive_time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(config_.keepalive_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port would start and share its connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  gpr_set_log_function(LogGrpcLine);
  grpc_binding.store(true);
  grpc_server_ = builder.BuildAndStart();
  grpc_binding.store(false);
  if (grpc_server_ == nullptr || grpc_port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for gRPC on ", config_.grpc_address, ": ", WhyCannotBind(config_.grpc_address)));
  }
  grpc_server_->GetHealthCheckService()->SetServingStatus(false);  // until every model is warm
  return absl::OkStatus();
}

absl::Status Server::StartHttp() {
  HttpServiceOptions options;
  options.hub = hub_.get();
  options.address = config_.http_address;
  options.http = config_.http;
  options.max_body_bytes = config_.max_message_bytes;
  options.bearer_token = config_.bearer_token;
  options.tls_cert_path = config_.tls_cert_path;
  options.tls_key_path = config_.tls_key_path;
  transcriptions_ = std::make_unique<voice::OpenAiTranscriptions>(hub_.get(), riva_service_->models(),
                                                                  riva_service_->metrics(), riva_service_->decodes());
  options.transcriptions = [transcriptions = transcriptions_.get()](
                               HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange) {
    transcriptions->Serve(request, exchange);
  };
  absl::StatusOr<std::unique_ptr<HttpService>> http = HttpService::Start(options);
  if (!http.ok()) return http.status();
  http_ = *std::move(http);
  return absl::OkStatus();
}

int Server::http_port() const { return http_ ? http_->port() : 0; }

absl::Status Server::LoadModels(const std::atomic<bool>* cancel) {
  RepositoryOptions options;
  options.path = config_.model_repository;
  options.cancel = cancel;
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository = ModelRepository::Load(options);
  if (!repository.ok()) {
    return absl::Status(repository.status().code(), absl::StrCat("model repository ", config_.model_repository,
                                                                 ": ", repository.status().message()));
  }
  repository_ = *std::move(repository);
  LogRepository(*repository_);
  for (const LoadedModel& loaded : repository_->models()) {
    metrics_->SetModelMemory(loaded.config->name, MemoryOf(loaded));
  }
  std::vector<std::unique_ptr<ServedModel>> models;
  std::vector<std::unique_ptr<GenerationModel>> generation_models;
  std::vector<std::unique_ptr<EmbeddingModel>> embedding_models;
  std::vector<std::unique_ptr<SpeechDecoder>> speech_decoders;
  for (LoadedModel& loaded : repository_->mutable_models()) {
    if (loaded.config->is_encoder_decoder()) {
      absl::StatusOr<std::unique_ptr<SpeechDecoder>> decoder = CreateSpeechDecoder(loaded, metrics_.get());
      if (!decoder.ok()) return decoder.status();
      speech_decoders.push_back(*std::move(decoder));
    }
    if (loaded.config->kind == ModelKind::kGeneration) {
      GenerationModelOptions options;
      options.config = loaded.config.get();
      for (auto& instance : loaded.generation_instances) options.instances.push_back(instance.get());
      options.state = &hub_->state();
      options.metrics = metrics_.get();
      if (metrics_) metrics_->AddGenerationModelCost(*loaded.config);
      absl::StatusOr<std::unique_ptr<GenerationModel>> model = GenerationModel::Create(options);
      if (!model.ok()) return absl::Status(model.status().code(), absl::StrCat("generation engine for ",
                                                                               loaded.config->name, ": ",
                                                                               model.status().message()));
      generation_models.push_back(*std::move(model));
      continue;
    }
    ServedModelOptions options;
    options.config = loaded.config.get();
    for (auto& instance : loaded.instances) options.instances.push_back(instance.get());
    options.state = &hub_->state();
    options.metrics = metrics_.get();
    absl::StatusOr<std::unique_ptr<ServedModel>> model = ServedModel::Create(options);
    if (!model.ok()) return absl::Status(model.status().code(), absl::StrCat("scheduler for ", loaded.config->name,
                                                                             ": ", model.status().message()));
    if (loaded.config->embedding) {
      absl::StatusOr<std::unique_ptr<EmbeddingModel>> embedding = EmbeddingModel::Create(model->get());
      if (!embedding.ok()) return absl::Status(embedding.status().code(), absl::StrCat("embeddings for ",
                                                                                       loaded.config->name, ": ",
                                                                                       embedding.status().message()));
      embedding_models.push_back(*std::move(embedding));
    }
    models.push_back(*std::move(model));
  }
  std::vector<std::unique_ptr<voice::StreamEngine>> stream_engines;
  for (size_t i = 0; i < models.size(); ++i) {
    LoadedModel* loaded = nullptr;
    for (LoadedModel& candidate : repository_->mutable_models()) {
      if (candidate.config.get() == &models[i]->config()) loaded = &candidate;
    }
    if (loaded == nullptr || loaded->stream_instances.empty()) continue;
    // One engine per model, on its first instance's stream backend (the others hold idle slots).
    absl::StatusOr<std::unique_ptr<voice::StreamEngine>> engine = voice::StreamEngine::Create(
        {.config = loaded->config.get(), .backend = loaded->stream_instances.front().get(),
         .stats = &models[i]->stats(), .metrics = riva_service_->metrics()});
    if (!engine.ok()) return engine.status();
    stream_engines.push_back(*std::move(engine));
  }
  hub_->Publish(std::move(models), std::move(generation_models), std::move(embedding_models),
                std::move(speech_decoders));
  riva_service_->stream_engines().Publish(std::move(stream_engines));
  if (absl::Status voice = riva_service_->CheckDefaultModel(); !voice.ok()) return voice;
  hub_->state().SetReady();
  grpc_server_->GetHealthCheckService()->SetServingStatus(true);
  return absl::OkStatus();
}

bool Server::Drain(absl::Duration grace) {
  hub_->state().BeginDrain();
  if (grpc_server_) grpc_server_->GetHealthCheckService()->SetServingStatus(false);
  // The long calls admitted before the drain (Riva Recognize windows, streams) run to their end first, their
  // later windows still accepted; then StopAll returns once every accepted request is answered. Both may outlive
  // the grace period (the caller then exits), so they run on a detached thread that owns nothing on this stack.
  auto stopped = std::make_shared<std::promise<void>>();
  std::future<void> done = stopped->get_future();
  std::thread([hub = hub_.get(), stopped] {
    hub->state().WaitForAdmittedCalls();
    hub->StopAll();
    stopped->set_value();
  }).detach();
  if (done.wait_for(std::chrono::nanoseconds(absl::ToInt64Nanoseconds(grace))) != std::future_status::ready) {
    return false;
  }
  CloseListeners();
  return true;
}

void Server::CloseListeners() {
  if (grpc_server_) {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    grpc_server_.reset();
  }
  if (http_) {
    http_->Stop();
    http_.reset();
  }
}

}  // namespace sluice
