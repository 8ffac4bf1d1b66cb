// /metrics end to end: a real sluice-server on a sim-backed speech model, a known set of HTTP requests, then
// the scrape is checked to the exact count and sum, and promtool (Debian's prometheus) checks the format.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "tests/server/metrics_samples.h"
#include "tests/server/server_process.h"

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
  EXPECT_EQ(s["sluice_request_input_length_bucket{" + m + ",le=\"100\"}"], 2);
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

}  // namespace
}  // namespace sluice
