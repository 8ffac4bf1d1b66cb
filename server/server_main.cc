// sluice-server: listens at once (answering not-ready), loads and warms the model repository, serves KServe v2
// over gRPC and HTTP, and drains on SIGTERM/SIGINT: not-ready at once, refuse new work, finish what was accepted,
// unload the models (releasing their devices) and exit 0 within the grace period (3 when it runs out).
// Thread roles: the main thread loads, then waits for a signal and runs the drain.
#include <pthread.h>
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

pthread_t main_thread;

// Runs on a thread that did not block the signal: one a library started before main (Debian's pthread OpenBLAS
// starts its pool when it is loaded). Without it, the signal's default action killed the whole process whenever
// the kernel picked such a thread (a SIGTERM right after LISTENING, before the main thread reached sigwait:
// server_edges_tests' LoadingTest, intermittently). It hands the signal to the main thread, which blocks it until
// its sigwait takes it (pthread_kill is async-signal-safe).
void ForwardToMainThread(int signal_number) { pthread_kill(main_thread, signal_number); }

// Signals are taken synchronously by the main thread: blocked here, before any thread of ours starts (they inherit
// the mask); threads started before main are covered by ForwardToMainThread.
sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  main_thread = pthread_self();
  struct sigaction forward = {};
  forward.sa_handler = ForwardToMainThread;
  sigfillset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &forward, nullptr);
  sigaction(SIGINT, &forward, nullptr);
  return signals;
}

// One line on stdout per state ("LISTENING ... (loading models)", then "READY ..."), for scripts and tests.
void Announce(const ServerConfig& config, Server& server, const char* state, const char* note) {
  const std::string grpc = WithPort(config.grpc_address, server.grpc_port());
  const std::string http = WithPort(config.http_address, server.http_port());
  std::printf("sluice-server %s grpc=%s http=%s%s\n", state, grpc.c_str(), http.c_str(), note);
  std::fflush(stdout);
}

// How long a SIGTERM during loading waits for the loading to stop (between instances, and between NEFFs on the
// Neuron Runtime) and for what was loaded to be released, before the process exits without it.
// On a device a NEFF can take seconds to load; a longer one is abandoned (the driver reclaims the cores at exit),
// which is no worse than not unloading at all, and an orchestrator's grace period is not spent waiting.
constexpr auto kStopLoadingTimeout = std::chrono::seconds(5);

// What a load that a signal interrupted came to.
enum class LoadOutcome { kLoaded, kFailed, kStopped };

// Loads the models on a helper thread while this one keeps taking signals. A SIGTERM during a long load (an
// orchestrator giving up on a pod) asks the load to stop and waits up to kStopLoadingTimeout for it: the load then
// returns Cancelled having destroyed what it had loaded (the Neuron Runtime backend: every NEFF unloaded, then
// nrt_close, which hands the NeuronCores back), and the process exits 0 — nothing was accepted, so nothing is
// lost. A load that does not stop in time (one graph loading for longer) is abandoned with _Exit(0): exiting
// matters more than tidying. If the load completed anyway, *signal_number is set and the caller drains.
LoadOutcome LoadOrStop(Server& server, const sigset_t& signals, absl::Status& status, int& signal_number) {
  // Shared with the loading thread, which may outlive this frame only when the process is about to _Exit.
  auto cancel = std::make_shared<std::atomic<bool>>(false);
  auto loaded = std::make_shared<std::promise<absl::Status>>();
  std::future<absl::Status> done = loaded->get_future();
  std::thread([&server, loaded, cancel] { loaded->set_value(server.LoadModels(cancel.get())); }).detach();
  const timespec poll = {0, 100 * 1000 * 1000};
  while (done.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    const int received = sigtimedwait(&signals, nullptr, &poll);
    if (received <= 0) continue;
    signal_number = received;
    spdlog::info("{} while loading models: nothing accepted yet; stopping the load and releasing what it loaded",
                 strsignal(received));
    cancel->store(true);
    if (done.wait_for(kStopLoadingTimeout) != std::future_status::ready) {
      spdlog::warn("loading did not stop within {} s: exiting 0 without releasing the loaded models",
                   kStopLoadingTimeout.count());
      spdlog::default_logger()->flush();
      std::fflush(nullptr);
      std::_Exit(0);
    }
    status = done.get();
    return status.ok() ? LoadOutcome::kLoaded : LoadOutcome::kStopped;
  }
  status = done.get();
  return status.ok() ? LoadOutcome::kLoaded : LoadOutcome::kFailed;
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

[[noreturn]] void DrainAndExit(const ServerConfig& config, std::unique_ptr<Server> owned, int signal_number) {
  Server& server = *owned;
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

[[noreturn]] void WaitAndDrain(const ServerConfig& config, std::unique_ptr<Server> owned, sigset_t signals) {
  int signal_number = 0;
  sigwait(&signals, &signal_number);
  DrainAndExit(config, std::move(owned), signal_number);
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
  absl::Status loaded;
  int stop_signal = 0;
  switch (LoadOrStop(**server, signals, loaded, stop_signal)) {
    case LoadOutcome::kFailed:
      spdlog::critical("{}", std::string(loaded.message()));
      return 1;
    case LoadOutcome::kStopped:
      // LoadModels destroyed what it had loaded before returning: every device is released.
      spdlog::info("loading stopped ({}); models released; exiting 0", std::string(loaded.message()));
      spdlog::default_logger()->flush();
      std::fflush(nullptr);
      std::_Exit(0);
    case LoadOutcome::kLoaded:
      break;
  }
  if (stop_signal != 0) {  // the signal came as the last model finished loading: drain (nothing to wait for)
    spdlog::info("models loaded just as {} arrived", strsignal(stop_signal));
    DrainAndExit(*config, *std::move(server), stop_signal);
  }
  spdlog::info("READY in {:.2f} s ({} models, {} generation models)", absl::ToDoubleSeconds(absl::Now() - start),
               (*server)->hub().models().size(), (*server)->hub().generation_models().size());
  Announce(*config, **server, "READY", "");
  WaitAndDrain(*config, *std::move(server), signals);
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) { return sluice::Run(argc, argv); }
