// sluice-server: loads and warms the model repository, serves KServe v2 over gRPC (and HTTP), and drains on
// SIGTERM/SIGINT: not-ready at once, refuse new work, finish what was accepted, exit 0 within the grace period.
// Thread roles: main thread loads, starts the front ends, then waits for a signal and runs the drain.
#include <signal.h>

#include <cstdio>
#include <future>
#include <memory>
#include <string>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backend/model_repository.h"
#include "scheduler/dynamic_batcher.h"
#include "server/grpc_service.h"
#include "server/http_service.h"
#include "server/server_config.h"

namespace sluice {
namespace {

// The one line to change to swap the scheduler implementation. Every executed batch is reported to `metrics`.
absl::StatusOr<std::unique_ptr<Scheduler>> MakeScheduler(LoadedModel& model, ModelMetrics* metrics) {
  DynamicBatcherOptions options;
  options.model = model.config.get();
  for (auto& instance : model.instances) options.instances.push_back(instance.get());
  options.on_batch = [metrics](const BatchReport& report) { metrics->RecordBatch(report); };
  return CreateDynamicBatcher(options);
}

std::string WithPort(const std::string& address, int port) {
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  return text;
}

void LogRepository(const ModelRepository& repository) {
  for (const LoadedModel& model : repository.models()) {
    const ModelConfig& config = *model.config;
    spdlog::info("model {}: {} instance(s), lengths [{}], batch sizes [{}], loaded+warmed in {:.2f} s", config.name,
                 model.instances.size(), fmt::join(config.buckets.lengths, ","),
                 fmt::join(config.buckets.batch_sizes, ","), model.load_seconds);
    for (const auto& instance : model.instances) {
      for (const BucketLoadStats& bucket : instance->load_stats()) {
        spdlog::debug("  {} bucket b{} l{}: load {:.3f} s, warm {:.3f} s", instance->Describe(), bucket.batch_size,
                      bucket.length, bucket.load_seconds, bucket.warm_seconds);
      }
    }
  }
}

int Run(int argc, char** argv) {
  CLI::App app{"sluice-server: KServe v2 (gRPC + HTTP) inference server for static-shape accelerators"};
  std::string config_path;
  int grpc_port = -1, http_port = -1;
  app.add_option("--config", config_path, "server config (yaml)")->required()->check(CLI::ExistingFile);
  app.add_option("--grpc-port", grpc_port, "override grpc.address's port (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--http-port", http_port, "override http.address's port (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  CLI11_PARSE(app, argc, argv);

  // Signals are taken synchronously by the main thread; block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<ServerConfig> config = LoadServerConfig(config_path);
  if (!config.ok()) {
    std::fprintf(stderr, "sluice-server: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (grpc_port >= 0) config->grpc_address = WithPort(config->grpc_address, grpc_port);
  if (http_port >= 0) config->http_address = WithPort(config->http_address, http_port);
  spdlog::set_level(spdlog::level::from_str(config->log_level));

  const absl::Time load_start = absl::Now();  // also when cost starts to accrue: loading is paid time
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository = ModelRepository::Load({config->model_repository});
  if (!repository.ok()) {
    spdlog::critical("model repository {}: {}", config->model_repository, std::string(repository.status().message()));
    return 1;
  }
  LogRepository(**repository);
  ModelHub hub;
  ServerMetrics metrics(load_start, config->cost);
  hub.SetMetrics(&metrics);
  if (config->cost) {
    spdlog::info("cost metrics: {} $/h for {} accelerator(s) ({})", config->cost->hourly_usd,
                 config->cost->accelerators, config->cost->source);
  }
  for (LoadedModel& model : (*repository)->mutable_models()) {
    std::vector<const Backend*> instances;
    for (const auto& instance : model.instances) instances.push_back(instance.get());
    ModelMetrics* model_metrics = metrics.AddModel(*model.config, instances, /*scheduler=*/nullptr,
                                                   [&hub] { return hub.ready(); });
    absl::StatusOr<std::unique_ptr<Scheduler>> scheduler = MakeScheduler(model, model_metrics);
    if (!scheduler.ok()) {
      spdlog::critical("scheduler for {}: {}", model.config->name, std::string(scheduler.status().message()));
      return 1;
    }
    model_metrics->AttachScheduler(scheduler->get());
    auto served = std::make_unique<ServedModel>(model.config.get(), *std::move(scheduler), model.load_seconds);
    served->SetMetrics(model_metrics);
    hub.Add(std::move(served));
  }

  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (!config->tls_cert_path.empty()) {
    absl::StatusOr<std::string> cert = ReadFile(config->tls_cert_path), key = ReadFile(config->tls_key_path);
    if (!cert.ok() || !key.ok()) {
      spdlog::critical("tls: {}", std::string((!cert.ok() ? cert.status() : key.status()).message()));
      return 1;
    }
    grpc::SslServerCredentialsOptions ssl;
    ssl.pem_key_cert_pairs.push_back({*key, *cert});
    credentials = grpc::SslServerCredentials(ssl);
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  InferenceGrpcService service(&hub, config->bearer_token);
  grpc::ServerBuilder builder;
  int bound_grpc_port = 0;
  builder.AddListeningPort(config->grpc_address, credentials, &bound_grpc_port);
  builder.RegisterService(&service);
  builder.SetMaxReceiveMessageSize(static_cast<int>(config->max_message_bytes));
  builder.SetMaxSendMessageSize(static_cast<int>(config->max_message_bytes));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, static_cast<int>(config->keepalive_time_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, static_cast<int>(config->keepalive_timeout_ms));
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::unique_ptr<grpc::Server> grpc_server = builder.BuildAndStart();
  if (grpc_server == nullptr || bound_grpc_port == 0) {
    spdlog::critical("cannot listen for gRPC on {}", config->grpc_address);
    return 1;
  }
  HttpServiceOptions http_options{&hub, config->http_address, config->max_message_bytes, config->bearer_token,
                                  config->tls_cert_path, config->tls_key_path};
  absl::StatusOr<std::unique_ptr<HttpService>> http = HttpService::Start(http_options);
  if (!http.ok()) {
    spdlog::critical("http: {}", std::string(http.status().message()));
    return 1;
  }
  hub.SetReady();
  grpc_server->GetHealthCheckService()->SetServingStatus(true);
  const std::string grpc_address = WithPort(config->grpc_address, bound_grpc_port);
  const std::string http_address = WithPort(config->http_address, (*http)->port());
  spdlog::info("READY in {:.2f} s: grpc {} http {} ({} models)", absl::ToDoubleSeconds(absl::Now() - load_start),
               grpc_address, http_address, hub.models().size());
  std::printf("sluice-server READY grpc=%s http=%s\n", grpc_address.c_str(), http_address.c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  hub.BeginDrain();
  grpc_server->GetHealthCheckService()->SetServingStatus(false);
  const int64_t in_flight = hub.InFlight();
  spdlog::info("{}: draining {} accepted request(s), grace {:.1f} s", strsignal(signal_number), in_flight,
               config->drain_grace_seconds);
  std::future<void> stopped = std::async(std::launch::async, [&hub] { hub.StopAll(); });
  const bool drained = stopped.wait_for(std::chrono::duration<double>(config->drain_grace_seconds)) ==
                       std::future_status::ready;
  if (!drained) {
    spdlog::error("grace period over with {} request(s) unfinished; exiting anyway", hub.InFlight());
    std::fflush(nullptr);
    std::_Exit(3);
  }
  grpc_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  (*http)->Stop();
  for (const auto& model : hub.models()) {
    const ModelStatsSnapshot stats = model->stats().Snapshot();
    spdlog::info("drained {}: {} succeeded, {} failed in total", model->config().name, stats.inference_count,
                 stats.fail.count);
  }
  spdlog::info("drain complete ({} request(s) were in flight); exiting 0", in_flight);
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) { return sluice::Run(argc, argv); }
