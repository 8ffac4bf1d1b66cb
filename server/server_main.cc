// sluice-server: listens at once (answering not-ready), loads and warms the model repository, serves KServe v2
// over gRPC and HTTP, and drains on SIGTERM/SIGINT: not-ready at once, refuse new work, finish what was accepted,
// unload the models (releasing their devices) and exit 0 within the grace period (3 when it runs out).
// Thread roles: the main thread loads, then waits for a signal and runs the drain.
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/app/server.h"

namespace sluice {
namespace {

struct CommandLine {
  std::string config_path;
  int grpc_port = -1;
  int http_port = -1;
};

std::string WithPort(const std::string& address, int port) {
  return absl::StrCat(address.substr(0, address.rfind(':')), ":", port);
}

// The config file with the command line's port overrides applied; exits 2 with the error otherwise.
absl::StatusOr<ServerConfig> LoadConfig(const CommandLine& flags) {
  absl::StatusOr<ServerConfig> config = LoadServerConfig(flags.config_path);
  if (!config.ok()) return config;
  if (flags.grpc_port >= 0) config->grpc_address = WithPort(config->grpc_address, flags.grpc_port);
  if (flags.http_port >= 0) config->http_address = WithPort(config->http_address, flags.http_port);
  return config;
}

// Signals are taken synchronously by the main thread: blocked here, before any thread starts.
sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// One line on stdout per state ("LISTENING ... (loading models)", then "READY ..."), for scripts and tests.
void Announce(const ServerConfig& config, Server& server, const char* state, const char* note) {
  const std::string grpc = WithPort(config.grpc_address, server.grpc_port());
  const std::string http = WithPort(config.http_address, server.http_port());
  std::printf("sluice-server %s grpc=%s http=%s%s\n", state, grpc.c_str(), http.c_str(), note);
  std::fflush(stdout);
}

// Loads the models on a helper thread while this one keeps taking signals: a SIGTERM during a long load (an
// orchestrator giving up on a pod) exits at once with 0 — nothing was accepted yet, so nothing is lost.
absl::Status LoadOrStop(Server& server, const sigset_t& signals) {
  std::promise<absl::Status> loaded;
  std::future<absl::Status> done = loaded.get_future();
  std::thread([&server, &loaded] { loaded.set_value(server.LoadModels()); }).detach();
  const timespec poll = {0, 100 * 1000 * 1000};
  while (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    const int signal_number = sigtimedwait(&signals, nullptr, &poll);
    if (signal_number > 0) {
      spdlog::info("{} while loading models: nothing accepted yet; exiting 0", strsignal(signal_number));
      std::fflush(nullptr);
      std::_Exit(0);
    }
  }
  return done.get();
}

// Whether no instance can still be inside its backend: none left rotation (a batch past execution_timeout_ms takes
// its instance out while the call may still run; a vanished device also does, and is left alone as well).
bool EveryInstanceInRotation(ModelHub& hub) {
  for (const auto& model : hub.models()) {
    int instances = 0;
    for (const InstanceGroup& group : model->config().instances) instances += group.count;
    if (model->scheduler().InstancesInRotation() != instances) return false;
  }
  for (const auto& model : hub.generation_models()) {
    int instances = 0;
    for (const InstanceGroup& group : model->config().instances) instances += group.count;
    if (model->engine().InstancesInRotation() != instances) return false;
  }
  return true;
}

// After a complete drain: destroys the server, so that every backend releases its device (the Neuron Runtime
// backend: nrt_unload of every NEFF, then nrt_close, which hands the NeuronCores back). Skipped when an instance
// may still be executing (destroying it would wait for it); bounded, since exiting matters more than tidying.
void ReleaseModels(std::unique_ptr<Server> server) {
  if (!EveryInstanceInRotation(server->hub())) {
    spdlog::warn("an instance left rotation (timed out or device gone): exiting without unloading the models");
    static_cast<void>(server.release());  // deliberately leaked: the process ends next
    return;
  }
  auto released = std::make_shared<std::promise<void>>();
  std::future<void> done = released->get_future();
  std::thread([owned = server.release(), released] {
    delete owned;
    released->set_value();
  }).detach();
  if (done.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    spdlog::warn("unloading the models took more than 10 s: exiting without waiting for the rest");
  } else {
    spdlog::info("models unloaded");
  }
}

[[noreturn]] void WaitAndDrain(const ServerConfig& config, std::unique_ptr<Server> owned, sigset_t signals) {
  Server& server = *owned;
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  const int64_t in_flight = server.hub().InFlight();
  spdlog::info("{}: draining {} accepted request(s) and {} voice call(s), grace {:.1f} s", strsignal(signal_number),
               in_flight, server.hub().state().admitted_calls(), config.drain_grace_seconds);
  if (!server.Drain(absl::Seconds(config.drain_grace_seconds))) {
    spdlog::error("grace period over with {} request(s) and {} voice call(s) unfinished; exiting anyway",
                  server.hub().InFlight(), server.hub().state().admitted_calls());
    std::fflush(nullptr);
    std::_Exit(3);
  }
  for (const auto& model : server.hub().models()) {
    const ModelStatsSnapshot stats = model->stats().Snapshot();
    spdlog::info("drained {}: {} succeeded, {} failed in total", model->config().name, stats.inference_count,
                 stats.fail.count);
  }
  spdlog::info("drain complete ({} request(s) were in flight)", in_flight);
  // Every accepted request is answered and the listeners are closed: unload the models, then exit 0.
  ReleaseModels(std::move(owned));
  spdlog::info("exiting 0");
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  std::_Exit(0);
}

int Run(int argc, char** argv) {
  CLI::App app{"sluice-server: KServe v2 (gRPC + HTTP) inference server for static-shape accelerators"};
  CommandLine flags;
  app.set_version_flag("--version", "sluice-server " SLUICE_VERSION);  // project(VERSION) in CMakeLists.txt
  app.add_option("--config", flags.config_path, "server config (yaml)")->required()->check(CLI::ExistingFile);
  app.add_option("--grpc-port", flags.grpc_port, "override grpc.address's port (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--http-port", flags.http_port, "override http.address's port (0 = any free port)")
      ->check(CLI::Range(0, 65535));
  CLI11_PARSE(app, argc, argv);
  const sigset_t signals = BlockTerminationSignals();

  absl::StatusOr<ServerConfig> config = LoadConfig(flags);
  if (!config.ok()) {
    std::fprintf(stderr, "sluice-server: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  spdlog::set_level(spdlog::level::from_str(config->log_level));
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(*config);
  if (!server.ok()) {
    spdlog::critical("{}", std::string(server.status().message()));
    return 1;
  }
  Announce(*config, **server, "LISTENING", " (loading models: not ready yet)");
  if (config->cost) {
    spdlog::info("cost metrics: {} $/h for {} accelerator(s) ({})", config->cost->hourly_usd,
                 config->cost->accelerators, config->cost->source);
  }
  if (absl::Status loaded = LoadOrStop(**server, signals); !loaded.ok()) {
    spdlog::critical("{}", std::string(loaded.message()));
    return 1;
  }
  spdlog::info("READY in {:.2f} s ({} models, {} generation models)", absl::ToDoubleSeconds(absl::Now() - start),
               (*server)->hub().models().size(), (*server)->hub().generation_models().size());
  Announce(*config, **server, "READY", "");
  WaitAndDrain(*config, *std::move(server), signals);
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) { return sluice::Run(argc, argv); }
