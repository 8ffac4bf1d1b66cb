// sluice-bench-scheduler: what the dynamic batcher costs and what it captures. Prints, in one run:
//  1. overhead per request with a zero-latency sim backend (enqueue -> on_done, one request at a time);
//  2. batching capture with an accelerator-like sim cost model: saturated throughput with dynamic batching
//     vs batch size 1, as a fraction of the ideal ratio the cost model itself gives;
//  3. (with --repository) the real asr_ctc graphs on a fixed mix of lengths: served throughput through the
//     scheduler vs the same requests run straight on the backend, grouped per bucket at the best batch size.
// A benchmark, not a test: numbers vary with the machine; compare ratios measured in one run.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <random>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/synchronization/notification.h"
#include "backend/model_repository.h"
#include "backend/reference_set.h"
#include "backend/sim_backend.h"
#include "scheduler/batch_assembly.h"
#include "scheduler/bucket_table.h"
#include "scheduler/dynamic_batcher.h"

namespace sluice {
namespace {

ModelConfig SimSpeechModel(std::vector<int> batch_sizes, SimCostModel cost, double max_delay_ms) {
  ModelConfig model;
  model.name = "sim_speech";
  model.kind = ModelKind::kSpeech;
  model.inputs = {{"audio", DataType::kFp32, {kVariableDim}, 16000}};
  model.outputs = {{"frames", DataType::kFp32, {kVariableDim, 4}, std::nullopt}};
  model.buckets = {{16000}, std::move(batch_sizes)};
  model.batching.max_queue_delay_ms = max_delay_ms;
  model.batching.max_queue_size = 1024;
  model.instances = {{1, DeviceKind::kSim}};
  model.sim = cost;
  return model;
}

InferRequest Request(const std::vector<HostTensor>& inputs, int64_t length, std::function<void(InferResponse)> done) {
  InferRequest r;
  r.inputs = inputs;
  r.length = length;
  r.on_done = std::move(done);
  return r;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

void Overhead(int requests) {
  ModelConfig model = SimSpeechModel({1, 2, 4, 8}, {0, 0, 1.0}, 0.0);
  auto backend = *CreateSimBackend({&model, model.instances[0]});
  auto scheduler = *CreateDynamicBatcher({&model, {backend.get()}});
  std::vector<HostTensor> audio = {HostTensor::Zeros(DataType::kFp32, {16000})};
  std::vector<double> us;
  for (int i = 0; i < requests; ++i) {
    absl::Notification done;
    const absl::Time start = absl::Now();
    (void)scheduler->Enqueue(Request(audio, 16000, [&](InferResponse) { done.Notify(); }));
    done.WaitForNotification();
    us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  std::printf("1. scheduler overhead, zero-latency sim, 1 s audio, %d sequential requests: p50 %.1f us, p99 %.1f us\n",
              requests, Percentile(us, 0.5), Percentile(us, 0.99));
}

// Closed loop: `clients` threads each keep one request in flight for `seconds`. Returns completed requests/s.
double ClosedLoop(Scheduler& scheduler, const std::vector<HostTensor>& inputs, int64_t length, int clients,
                  double seconds) {
  std::atomic<int64_t> completed{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      while (!stop.load()) {
        absl::Notification done;
        if (!scheduler.Enqueue(Request(inputs, length, [&](InferResponse) { done.Notify(); })).ok()) continue;
        done.WaitForNotification();
        ++completed;
      }
    });
  }
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  return completed.load() / absl::ToDoubleSeconds(absl::Now() - start);
}

void BatchingCapture(double seconds) {
  // A NeuronCore/GPU-like cost: 4 ms per launch plus 2 ms for a full batch of 8 one-second rows.
  const SimCostModel cost{4.0, 2000.0 / (8 * 16000), 0.01};  // 100 output frames per second of audio
  std::vector<HostTensor> audio = {HostTensor::Zeros(DataType::kFp32, {16000})};
  double throughput[2];
  const std::vector<int> sizes[2] = {{1}, {1, 2, 4, 8}};
  for (int k = 0; k < 2; ++k) {
    ModelConfig model = SimSpeechModel(sizes[k], cost, 2.0);
    auto backend = *CreateSimBackend({&model, model.instances[0]});
    auto scheduler = *CreateDynamicBatcher({&model, {backend.get()}});
    throughput[k] = ClosedLoop(*scheduler, audio, 16000, 32, seconds);
    scheduler->Stop();
  }
  const double ideal = (8 / absl::ToDoubleSeconds(SimLatency(cost, 8, 16000))) /
                       (1 / absl::ToDoubleSeconds(SimLatency(cost, 1, 16000)));
  std::printf("2. batching capture, sim cost 4 ms + 0.25 ms/row, 32 clients, %.0f s each: batch-1 %.1f req/s, "
              "dynamic %.1f req/s, ratio %.2fx of ideal %.2fx = %.0f %% captured\n",
              seconds, throughput[0], throughput[1], throughput[1] / throughput[0], ideal,
              100.0 * (throughput[1] / throughput[0]) / ideal);
}

void RealGraphs(const std::string& repository, int clients) {
  auto repo = ModelRepository::Load({repository, {"asr_ctc"}, 2});
  if (!repo.ok()) {
    std::printf("3. skipped: %s\n", std::string(repo.status().message()).c_str());
    return;
  }
  const LoadedModel& loaded = (*repo)->models().front();
  const ModelConfig& model = *loaded.config;
  std::vector<ReferenceCase> cases = *LoadReferenceSet(model.directory);
  std::vector<const ReferenceCase*> mix;  // a fixed mix: every reference case 4 times
  for (int r = 0; r < 4; ++r) {
    for (const ReferenceCase& c : cases) mix.push_back(&c);
  }
  double audio_seconds = 0;
  for (const ReferenceCase* c : mix) audio_seconds += c->length() / 16000.0;

  // Offline best: group the mix per bucket and run each group straight on the backend at every compiled batch
  // size; keep the fastest size per bucket (on a CPU that is often not the largest).
  BucketTable table(model.buckets);
  std::vector<std::vector<const InferRequest*>> per_bucket(table.num_buckets());
  std::vector<InferRequest> requests;
  requests.reserve(mix.size());
  for (const ReferenceCase* c : mix) requests.push_back(Request(c->inputs, c->length(), [](InferResponse) {}));
  for (const InferRequest& r : requests) per_bucket[*table.BucketFor(r.length)].push_back(&r);
  Backend& instance = *loaded.instances.front();
  double offline_seconds = 0;
  for (size_t b = 0; b < per_bucket.size(); ++b) {
    double best = 1e30;
    for (int batch_size : table.batch_sizes()) {
      const absl::Time t0 = absl::Now();
      for (size_t i = 0; i < per_bucket[b].size(); i += batch_size) {
        std::vector<const InferRequest*> group(per_bucket[b].begin() + i,
                                               per_bucket[b].begin() + std::min(per_bucket[b].size(), i + batch_size));
        (void)instance.Execute(AssembleBatch(model, group, batch_size, table.length(b)));
      }
      best = std::min(best, absl::ToDoubleSeconds(absl::Now() - t0));
    }
    offline_seconds += best;
  }
  const double offline = audio_seconds / offline_seconds;

  std::vector<Backend*> instances = {loaded.instances.front().get()};
  auto scheduler = *CreateDynamicBatcher({&model, instances});
  std::atomic<size_t> next{0};
  std::vector<std::thread> threads;
  const absl::Time start = absl::Now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      for (size_t i; (i = next.fetch_add(1)) < mix.size();) {
        absl::Notification done;
        (void)scheduler->Enqueue(Request(mix[i]->inputs, mix[i]->length(), [&](InferResponse) { done.Notify(); }));
        done.WaitForNotification();
      }
    });
  }
  for (auto& t : threads) t.join();
  const double served = audio_seconds / absl::ToDoubleSeconds(absl::Now() - start);
  scheduler->Stop();
  std::printf("3. asr_ctc real graphs, 1 CPU instance, %zu requests (%.1f audio-s), %d clients: served %.1f audio-s/s, "
              "offline at the best batch size per bucket %.1f audio-s/s, served/offline = %.2f\n",
              mix.size(), audio_seconds, clients, served, offline, served / offline);
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) {
  CLI::App app{"sluice-bench-scheduler: scheduler overhead, batching capture, served vs raw backend throughput"};
  int requests = 2000;
  double seconds = 3;
  std::string repository;
  int clients = 8;
  app.add_option("--overhead-requests", requests, "sequential requests for the overhead measure");
  app.add_option("--seconds", seconds, "duration of each saturated sim run");
  app.add_option("--repository", repository, "model repository with asr_ctc (enables measure 3)");
  app.add_option("--clients", clients, "concurrent clients for measure 3");
  CLI11_PARSE(app, argc, argv);
  sluice::Overhead(requests);
  sluice::BatchingCapture(seconds);
  if (!repository.empty()) sluice::RealGraphs(repository, clients);
  return 0;
}
