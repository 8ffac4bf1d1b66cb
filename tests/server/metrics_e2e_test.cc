// /metrics end to end: a real sluice-server on a sim-backed speech model, a known set of HTTP requests, then
// the scrape is checked to the exact count and sum, and promtool (Debian's prometheus) checks the format. And the
// capacity gauges after a closed-loop load on a sim model whose every batch takes a fixed time.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "tests/server/metrics_samples.h"
#include "tests/server/server_process.h"
#include "tests/server/sim_models.h"

namespace sluice {
namespace {

std::string AudioJson(int64_t samples) {
  std::string data;
  for (int64_t i = 0; i < samples; ++i) data += (i ? ",0.25" : "0.25");
  return R"({"inputs":[{"name":"audio","datatype":"FP32","shape":[1,)" + std::to_string(samples) +
         R"(],"data":[)" + data + "]}]}";
}

// A speech model on the sim device: no graphs needed. 16 kHz, buckets 100/200 samples.
std::string WriteSimRepository() {
  const auto repo = std::filesystem::temp_directory_path() / ("sluice_metrics_repo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(repo / "sim_asr");
  std::ofstream(repo / "sim_asr" / "config.yaml") << R"(name: sim_asr
kind: speech
inputs: [{name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}]
outputs: [{name: frames, dtype: FP32, shape: [-1, 2]}]
buckets: {lengths: [100, 200], batch_sizes: [1, 2, 4]}
batching: {max_queue_delay_ms: 1, max_queue_size: 16}
instances: [{count: 1, device: sim}]
sim: {base_ms: 1, per_sample_us: 0, output_steps_per_input_step: 0.5}
)";
  return repo.string();
}

TEST(MetricsEndToEndTest, ScrapeCountsExactlyWhatWasServedAndPassesPromtool) {
  testing::ServerProcess server("cost: {hourly_usd: 3.6, accelerators: 2, source: test price}\n", {},
                                WriteSimRepository());
  ASSERT_TRUE(server.ready()) << server.Log();
  httplib::Client client("127.0.0.1", server.http_port());
  for (int64_t samples : {50, 150, 80}) {  // one at a time: each runs alone at batch size 1
    auto res = client.Post("/v2/models/sim_asr/infer", AudioJson(samples), "application/json");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
  }
  auto invalid = client.Post("/v2/models/sim_asr/infer", AudioJson(201), "application/json");  // over 200
  ASSERT_TRUE(invalid);
  EXPECT_EQ(invalid->status, 400);

  auto scrape = client.Get("/metrics");
  ASSERT_TRUE(scrape);
  ASSERT_EQ(scrape->status, 200);
  auto s = testing::ParseSamples(scrape->body);
  const std::string m = "model=\"sim_asr\"";
  EXPECT_EQ(s["sluice_requests_total{" + m + ",outcome=\"ok\"}"], 3);
  EXPECT_EQ(s["sluice_requests_total{" + m + ",outcome=\"invalid\"}"], 1);
  EXPECT_EQ(s["sluice_requests_total{" + m + ",outcome=\"rejected\"}"], 0);
  EXPECT_EQ(s["sluice_inferences_total{" + m + "}"], 3);
  EXPECT_DOUBLE_EQ(s["sluice_audio_seconds_total{" + m + "}"], (50.0 + 150 + 80) / 16000);
  EXPECT_EQ(s["sluice_real_samples_total{" + m + "}"], 280);
  EXPECT_EQ(s["sluice_computed_samples_total{" + m + "}"], 400);  // 100 + 200 + 100
  EXPECT_GE(s["sluice_computed_samples_total{" + m + "}"], s["sluice_real_samples_total{" + m + "}"]);
  EXPECT_DOUBLE_EQ(s["sluice_padding_efficiency{" + m + "}"], 0.7);
  EXPECT_EQ(s["sluice_batch_executions_total{bucket=\"100\"," + m + "}"], 2);
  EXPECT_EQ(s["sluice_batch_executions_total{bucket=\"200\"," + m + "}"], 1);
  EXPECT_EQ(s["sluice_request_latency_seconds_count{" + m + "}"], 3);
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"100\"}"], 2);
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"50\"}"], 1);  // boundaries ~5 % apart: ..., 50, 53, ...
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"77\"}"], 1);  // ..., 77, 81, ...
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"81\"}"], 2);
  EXPECT_EQ(s["sluice_request_length_count{" + m + "}"], 3);  // the invalid one never reached the scheduler
  EXPECT_EQ(s["sluice_model_ready{" + m + "}"], 1);
  // Cost: the model holds 1 of 2 accelerators at 3.6 $/h; the derived gauges come from the same render.
  const double cost = s["sluice_cost_usd{" + m + "}"];
  EXPECT_GT(cost, 0);
  EXPECT_NEAR(s["sluice_server_cost_usd{preset=\"\"}"], cost, 1e-12);
  EXPECT_NEAR(s["sluice_audio_seconds_per_dollar{" + m + "}"], (280.0 / 16000) / cost, 1e-9 * (280.0 / 16000) / cost);
  EXPECT_NEAR(s["sluice_dollars_per_1k_inferences{" + m + "}"], cost / 3 * 1000, 1e-9);
  EXPECT_GT(s["sluice_process_resident_memory_bytes"], 0);

  const std::string path = (server.dir() / "metrics.txt").string();
  std::ofstream(path) << scrape->body;
  const std::string command = "promtool check metrics < " + path + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  for (char buf[256]; std::fgets(buf, sizeof(buf), pipe);) output += buf;
  const int rc = ::pclose(pipe);
  EXPECT_EQ(rc, 0) << "promtool (Debian package prometheus, see deploy/install-deps.sh) said: " << output;
}

// One bucket of 16 steps, batch sizes 1 and 4, every batch 20 ms whatever its size (accelerator-like): under full
// load batches of 4, so 5 ms of the one instance per request and 200 requests/s at saturation.
constexpr int kFixedBatchMs = 20;
constexpr double kSecondsPerRequest = kFixedBatchMs / 1000.0 / 4;

std::string WriteFixedCostRepository() {
  const auto repo = std::filesystem::temp_directory_path() / ("sluice_capacity_repo_" + std::to_string(::getpid()));
  testing::WriteSimModel(repo, {.name = "fixed", .batch_sizes = "1, 4", .base_ms = kFixedBatchMs});
  return repo.string();
}

std::string XJson(int64_t steps) {
  std::string data;
  for (int64_t i = 0; i < steps; ++i) data += (i ? ",0.5" : "0.5");
  return R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,)" + std::to_string(steps) + R"(],"data":[)" +
         data + "]}]}";
}

TEST(MetricsEndToEndTest, CapacityGaugesFollowTheFixedBatchTimeAfterAClosedLoopLoad) {
  const auto launched = std::chrono::steady_clock::now();
  testing::ServerProcess server("", {}, WriteFixedCostRepository());
  ASSERT_TRUE(server.ready()) << server.Log();
  const auto ready = std::chrono::steady_clock::now();
  // Two clients in a closed loop for 3 s: batches of 1-2 real rows, the instance nearly always busy, but the
  // load is well under the 200 requests/s that full batches of 4 would serve.
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  const auto until = ready + std::chrono::seconds(3);
  for (int c = 0; c < 2; ++c) {
    clients.emplace_back([&, c] {
      httplib::Client client("127.0.0.1", server.http_port());
      for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
        auto res = client.Post("/v2/models/fixed/infer", XJson(8 + (c + i) % 9), "application/json");
        if (res && res->status == 200) ++ok;
      }
    });
  }
  for (std::thread& t : clients) t.join();
  httplib::Client client("127.0.0.1", server.http_port());
  auto scrape = client.Get("/metrics");
  const auto scraped = std::chrono::steady_clock::now();
  ASSERT_TRUE(scrape);
  auto s = testing::ParseSamples(scrape->body);
  const std::string m = "model=\"fixed\"";
  ASSERT_GT(ok.load(), 20);
  EXPECT_EQ(s["sluice_request_length_count{" + m + "}"], ok.load());

  // Saturation: 1 instance / 5 ms per request = 200/s (measured batches are a little over 20 ms: sleep overshoot).
  EXPECT_NEAR(s["sluice_capacity_max_requests_per_second{" + m + "}"], 1 / kSecondsPerRequest,
              0.15 / kSecondsPerRequest);
  // Utilization: the requests' 5 ms each over the window, which opened when the model was created (between the
  // launch and READY) and closed at the scrape.
  const double seconds_since_ready = std::chrono::duration<double>(scraped - ready).count();
  const double seconds_since_launch = std::chrono::duration<double>(scraped - launched).count();
  const double needed = ok.load() * kSecondsPerRequest;
  const double utilization = s["sluice_capacity_utilization{" + m + "}"];
  EXPECT_GT(utilization, 0.8 * needed / seconds_since_launch);
  EXPECT_LT(utilization, 1.2 * needed / seconds_since_ready);
  EXPECT_LT(utilization, 0.7);  // half-full batches: far from saturated ...
  EXPECT_GT(s["sluice_instance_busy_ratio{instance=\"0\"," + m + "}"], utilization);  // ... though busy
}

}  // namespace
}  // namespace sluice
