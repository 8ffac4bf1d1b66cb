// Metrics and cost arithmetic without a server: a real DynamicBatcher on the scripted sim backend reports
// batches into ServerMetrics; the rendered text is parsed back and checked to the exact value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "backend/base/cost.h"
#include "scheduler/dynamic_batcher.h"
#include "server/metrics/server_metrics.h"
#include "tests/scheduler/scheduler_test_util.h"
#include "tests/server/metrics_samples.h"
#include "tests/scheduler/scripted_backend.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(CostTest, DollarsFollowPriceShareAndTime) {
  const absl::Time start = absl::UnixEpoch();
  CostMeter meter({"inf2.xlarge", 0.7582, 2, "neuroncore", "test"}, start);
  EXPECT_DOUBLE_EQ(meter.Share(1), 0.5);
  EXPECT_DOUBLE_EQ(meter.Share(4), 1.0);  // more than the instance has is capped at the whole instance
  EXPECT_DOUBLE_EQ(meter.DollarsSoFar(1, start + absl::Hours(2)), 0.7582);
  EXPECT_DOUBLE_EQ(meter.DollarsSoFar(2, start + absl::Minutes(30)), 0.3791);
  EXPECT_DOUBLE_EQ(meter.DollarsSoFar(2, start - absl::Hours(1)), 0.0);
}

TEST(CostTest, AcceleratorsHeldCountsTheUnitOfEachDevice) {
  ModelConfig model;
  model.instances = {{2, DeviceKind::kCpu, std::nullopt, 3}, {1, DeviceKind::kSim}};
  EXPECT_EQ(AcceleratorsHeld(model), 7);
  model.instances = {{2, DeviceKind::kNeuron, CoreRange{0, 3}, 1}};
  EXPECT_EQ(AcceleratorsHeld(model), 4);
  model.instances = {{3, DeviceKind::kCuda}};
  EXPECT_EQ(AcceleratorsHeld(model), 3);
}

TEST(CostTest, ParsesPresetsFromTheShippedPricingFile) {
  auto root = YamlNode::LoadString("{preset: inf2.xlarge, pricing_file: deploy/pricing.yaml}", "server.yaml");
  ASSERT_TRUE(root.ok());
  absl::StatusOr<CostConfig> cost = ParseCostConfig(*root, SLUICE_SOURCE_DIR);
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_DOUBLE_EQ(cost->hourly_usd, 0.7582);
  EXPECT_EQ(cost->accelerators, 2);
  EXPECT_THAT(cost->source, HasSubstr("2026-01-21"));

  auto unknown = YamlNode::LoadString("{preset: p9.huge, pricing_file: deploy/pricing.yaml}", "server.yaml");
  absl::Status status = ParseCostConfig(*unknown, SLUICE_SOURCE_DIR).status();
  EXPECT_THAT(status.message(), HasSubstr("server.yaml:1:10: preset: no preset 'p9.huge' in"));

  auto explicit_price = YamlNode::LoadString("{hourly_usd: 2.5, accelerators: 4, source: quote}", "server.yaml");
  absl::StatusOr<CostConfig> manual = ParseCostConfig(*explicit_price, SLUICE_SOURCE_DIR);
  ASSERT_TRUE(manual.ok()) << manual.status();
  EXPECT_DOUBLE_EQ(manual->hourly_usd, 2.5);

  auto bad = YamlNode::LoadString("{hourly_usd: -1, accelerators: 4, source: quote}", "server.yaml");
  EXPECT_THAT(ParseCostConfig(*bad, SLUICE_SOURCE_DIR).status().message(),
              HasSubstr("hourly_usd: must be a positive price"));
}

// sluice_model_memory_bytes: one gauge per (model, kind), shared weights counted once (SumInstanceMemory).
TEST(ServerMetricsTest, ModelMemoryGaugesByKind) {
  ServerMetrics metrics(absl::UnixEpoch(), std::nullopt);
  InstanceMemory replica{2, 1000, "w on cpu", 300, 40, 2};
  metrics.SetModelMemory("llm", SumInstanceMemory({replica, replica}));
  metrics.SetModelMemory("asr", SumInstanceMemory({InstanceMemory{1, 0, "", 0, 5000, 4}}));
  auto s = testing::ParseSamples(metrics.Render(absl::UnixEpoch() + absl::Seconds(1)));
  EXPECT_EQ(s["sluice_model_memory_bytes{kind=\"weights\",model=\"llm\"}"], 1000);  // one copy for 2 replicas
  EXPECT_EQ(s["sluice_model_memory_bytes{kind=\"cache\",model=\"llm\"}"], 600);
  EXPECT_EQ(s["sluice_model_memory_bytes{kind=\"graphs\",model=\"llm\"}"], 80);
  EXPECT_EQ(s["sluice_model_memory_bytes{kind=\"weights\",model=\"asr\"}"], 0);  // format 1: inside the graphs
  EXPECT_EQ(s["sluice_model_memory_bytes{kind=\"graphs\",model=\"asr\"}"], 5000);
}

TEST(ServerMetricsTest, CountsBatchesPaddingAudioAndCostExactly) {
  ModelConfig model = testing::SmallSimModel();  // buckets 100/200/400 x batch 1/2/4, 16 kHz, one sim instance
  FakeClock clock;
  testing::ScriptedBackend backend(model, &clock, absl::Milliseconds(5));
  const absl::Time start = clock.Now();
  ServerMetrics metrics(start, CostConfig{"", 1.0, 2, "vcpu", "test price"});
  ModelMetrics* model_metrics = nullptr;
  auto scheduler = CreateDynamicBatcher(
      {&model, {&backend}, &clock, [&](const BatchReport& r) { model_metrics->RecordBatch(r); }});
  ASSERT_TRUE(scheduler.ok());
  model_metrics = metrics.AddModel(model, {&backend}, scheduler->get(), [] { return true; }, clock);

  std::vector<std::shared_ptr<testing::PendingAnswer>> answers;
  for (int64_t len : {10, 20, 30}) {
    model_metrics->RecordArrival(1, len);
    answers.push_back(testing::Submit(**scheduler, len));
  }
  clock.Advance(absl::Milliseconds(10));  // max delay: one batch of 3 real rows at compiled size 4
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_TRUE(answers[i]->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
    model_metrics->RecordRow(answers[i]->response);
    model_metrics->RecordRequest(answers[i]->response.status, absl::Milliseconds(15), 1, 10 * (i + 1));
  }
  model_metrics->RecordRequest(absl::InvalidArgumentError("bad"), absl::ZeroDuration(), 1, 0);
  model_metrics->RecordRequest(absl::ResourceExhaustedError("full"), absl::Milliseconds(1), 1, 50);
  (*scheduler)->Stop();
  const double window_seconds = absl::ToDoubleSeconds(clock.Now() - start);  // the capacity window so far

  auto s = testing::ParseSamples(metrics.Render(start + absl::Hours(1)));
  const std::string m = "model=\"sim_speech\"";
  EXPECT_EQ(s["sluice_requests_total{" + m + ",outcome=\"ok\"}"], 3);
  EXPECT_EQ(s["sluice_requests_total{" + m + ",outcome=\"invalid\"}"], 1);
  EXPECT_EQ(s["sluice_requests_total{" + m + ",outcome=\"rejected\"}"], 1);
  EXPECT_EQ(s["sluice_inferences_total{" + m + "}"], 3);
  EXPECT_EQ(s["sluice_batch_executions_total{bucket=\"100\"," + m + "}"], 1);
  EXPECT_EQ(s["sluice_real_samples_total{" + m + "}"], 60);
  EXPECT_EQ(s["sluice_computed_samples_total{" + m + "}"], 400);  // 4 rows x 100, the dummy row included
  EXPECT_DOUBLE_EQ(s["sluice_padding_efficiency{" + m + "}"], 0.15);
  EXPECT_DOUBLE_EQ(s["sluice_audio_seconds_total{" + m + "}"], 60.0 / 16000);
  EXPECT_EQ(s["sluice_batch_size_count{" + m + "}"], 1);
  EXPECT_EQ(s["sluice_batch_size_bucket{" + m + ",le=\"2\"}"], 0);
  EXPECT_EQ(s["sluice_batch_size_bucket{" + m + ",le=\"4\"}"], 1);
  EXPECT_EQ(s["sluice_queue_wait_seconds_count{" + m + "}"], 3);
  EXPECT_DOUBLE_EQ(s["sluice_batch_compute_seconds_sum{bucket=\"100\"," + m + "}"], 0.005);
  EXPECT_EQ(s["sluice_request_latency_seconds_count{" + m + "}"], 4);  // ok + rejected; invalid never queued
  EXPECT_EQ(s["sluice_queue_depth{" + m + "}"], 0);
  EXPECT_EQ(s["sluice_model_ready{" + m + "}"], 1);
  // Cost: 1 $/h, the model holds 1 of 2 accelerators, one hour since start -> 0.5 $.
  EXPECT_DOUBLE_EQ(s["sluice_cost_usd{" + m + "}"], 0.5);
  EXPECT_DOUBLE_EQ(s["sluice_audio_seconds_per_dollar{" + m + "}"], (60.0 / 16000) / 0.5);
  EXPECT_NEAR(s["sluice_dollars_per_1k_inferences{" + m + "}"], 0.5 / 3 * 1000, 1e-9);
  EXPECT_DOUBLE_EQ(s["sluice_instance_busy_ratio{instance=\"0\"," + m + "}"], 0.005 / 3600);
  EXPECT_GT(s["sluice_process_resident_memory_bytes"], 0);
  EXPECT_GE(s["sluice_process_peak_resident_memory_bytes"], s["sluice_process_resident_memory_bytes"]);
  // Request lengths at step resolution below 20 steps; each compiled length is a boundary.
  EXPECT_EQ(s["sluice_request_length_count{" + m + "}"], 3);
  EXPECT_EQ(s["sluice_request_length_sum{" + m + "}"], 60);
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"9\"}"], 0);
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"10\"}"], 1);
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"20\"}"], 2);
  EXPECT_EQ(s["sluice_request_length_bucket{" + m + ",le=\"100\"}"], 3);
  // Capacity: the only cost known is the measured batch (bucket 100 at size 4: 5 ms), so 1.25 ms per row; the
  // sim model reports no warm-up time (cost model 0). Three arrivals in bucket 100.
  EXPECT_DOUBLE_EQ(s["sluice_capacity_max_requests_per_second{" + m + "}"], 1 / (0.005 / 4));
  EXPECT_NEAR(s["sluice_capacity_utilization{" + m + "}"], 3 * (0.005 / 4) / window_seconds, 1e-12);
}

}  // namespace
}  // namespace sluice
