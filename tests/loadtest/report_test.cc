// Unit tests of the judging side of sluice-loadtest: percentiles and summaries, SLO parsing and verdicts,
// goodput, the Prometheus text parser and what is derived from two scrapes, output comparison (--verify's
// arithmetic, with corrupted tensors), pricing and cost, the JSON report, --compare and sweeps.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "backend/base/cost.h"
#include "backend/base/yaml_node.h"
#include "loadtest/core/slo.h"
#include "loadtest/core/summary.h"
#include "loadtest/core/sweep.h"
#include "loadtest/kserve/output_compare.h"
#include "loadtest/monitor/prometheus_text.h"
#include "loadtest/monitor/server_monitor.h"
#include "loadtest/report/compare.h"
#include "loadtest/report/plot_svg.h"
#include "loadtest/report/pricing.h"
#include "loadtest/report/report_json.h"
#include "loadtest/report/report_table.h"
#include "yaml-cpp/yaml.h"

namespace sluice::loadtest {
namespace {

using ::testing::HasSubstr;

// A run of 100 measured requests with latencies 1..100 ms over a 10 s window (+ 5 warm-up, 2 errors).
RunResult SyntheticRun() {
  RunResult run;
  run.concurrency = 4;
  for (int i = 0; i < 5; ++i) run.records.push_back({.index = static_cast<uint64_t>(i), .model = 0, .length = 16000,
                                                     .scheduled_s = 0, .sent_s = 0, .done_s = 0.5, .code = 0,
                                                     .measured = false});
  for (int i = 1; i <= 100; ++i) {
    RequestRecord r;
    r.index = 4 + i;
    r.model = 0;
    r.length = 32000;  // 2 s of audio
    r.scheduled_s = r.sent_s = 1 + (i - 1) * 0.09;
    r.done_s = r.scheduled_s + i / 1000.0;
    r.measured = true;
    run.records.push_back(r);
  }
  RequestRecord failed;
  failed.measured = true;
  failed.scheduled_s = 5;
  failed.done_s = 5.1;
  failed.code = 4;  // DEADLINE_EXCEEDED
  run.records.push_back(failed);
  failed.code = -1;  // dropped by the client
  run.records.push_back(failed);
  run.measure_start_s = 1;
  run.measure_end_s = 11;
  return run;
}

std::unique_ptr<Workload> SpeechWorkload() {
  ModelInfo info;
  info.name = "asr_ctc";
  info.kind = "speech";
  info.input_name = "audio";
  info.datatype = "FP32";
  info.max_length = 256000;
  info.sample_rate = 16000;
  std::vector<WorkloadModel> models;
  models.push_back({info, 1.0, *LengthProfile::Create("fixed:32000", 16000, 256000), nullptr});
  return *Workload::Create(std::move(models), 1);
}

TEST(SummaryTest, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(Percentile(v, 50), 50);
  EXPECT_EQ(Percentile(v, 99), 99);
  EXPECT_EQ(Percentile(v, 100), 100);
  EXPECT_EQ(Percentile(v, 0), 1);
  EXPECT_EQ(Percentile({}, 50), 0);
  EXPECT_EQ(Percentile({7}, 99), 7);
}

TEST(SummaryTest, CountsErrorsThroughputAndAudio) {
  auto workload = SpeechWorkload();
  RunSummary s = Summarize(SyntheticRun(), *workload, "", 1, nullptr);
  EXPECT_EQ(s.mode, "closed");
  EXPECT_EQ(s.total.requests, 102);
  EXPECT_EQ(s.total.ok, 100);
  EXPECT_EQ(s.total.errors, 2);
  EXPECT_EQ(s.total.errors_by_code.at("DEADLINE_EXCEEDED"), 1);
  EXPECT_EQ(s.total.errors_by_code.at("CLIENT_DROPPED"), 1);
  EXPECT_NEAR(s.total.error_rate, 2.0 / 102, 1e-12);
  EXPECT_DOUBLE_EQ(s.window_s, 10);
  EXPECT_DOUBLE_EQ(s.total.req_per_s, 10);
  EXPECT_DOUBLE_EQ(s.total.audio_seconds, 200);
  EXPECT_DOUBLE_EQ(s.total.audio_s_per_s, 20);
  EXPECT_NEAR(s.total.latency.p50_ms, 50, 1e-9);
  EXPECT_NEAR(s.total.latency.p99_ms, 99, 1e-9);
  EXPECT_NEAR(s.total.latency.max_ms, 100, 1e-9);
  EXPECT_EQ(s.total.good, 100);  // no per-request SLO: every success is good
  ASSERT_EQ(s.per_model.size(), 1u);
  EXPECT_EQ(s.per_model[0].ok, 100);
}

TEST(SloTest, ParsesEveryKeyAndRejectsUnknownOnesWithTheLine) {
  auto slo = ParseSlo("latency_ms: {p50: 60, p99: 120}\nmax_error_rate: 0.05\nmin_throughput_rps: 5\n"
                      "min_goodput_rps: 4\nmin_audio_seconds_per_second: 10\nrequest: {latency_ms: 80, max_rtf: 0.5}\n",
                      "slo.yaml");
  ASSERT_TRUE(slo.ok()) << slo.status();
  EXPECT_EQ(slo->latency_ms.at("p99"), 120);
  EXPECT_EQ(*slo->request_latency_ms, 80);
  auto typo = ParseSlo("max_error_rate: 0.1\nlatency_ms: {p98: 3}\n", "slo.yaml");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("slo.yaml:2"));
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("p98"));
  EXPECT_FALSE(ParseSlo("max_error_rate: 2\n", "slo.yaml").ok());
  EXPECT_FALSE(ParseSlo("min_throughput_rps: -1\n", "slo.yaml").ok());
  EXPECT_FALSE(ParseSlo("max_eror_rate: 0.1\n", "slo.yaml").ok());
}

// A run in which nothing succeeded: latency figures and objectives on them read n/a (0 would read as instant, and
// FAIL as a slow server), and each error code's first message is in the table and the JSON.
TEST(SloTest, FiguresWithoutSamplesAreNotApplicableAndErrorsKeepTheirMessages) {
  auto workload = SpeechWorkload();
  RunResult run;
  run.concurrency = 1;
  for (int i = 0; i < 3; ++i) {
    RequestRecord r;
    r.index = static_cast<uint64_t>(i);
    r.length = 16000;
    r.scheduled_s = r.sent_s = i;
    r.done_s = i + 0.1;
    r.code = 3;  // INVALID_ARGUMENT
    r.measured = true;
    run.records.push_back(r);
  }
  run.first_errors[3] = "token id 5000 is outside the vocabulary [0, 2000)";
  run.measure_start_s = 0;
  run.measure_end_s = 2.1;
  Report report;
  report.models.push_back({"asr_ctc", "speech", "speech", 1, 256000, 16000, false});
  report.summary = Summarize(run, *workload, "", 1, nullptr);
  auto slo = *ParseSlo("latency_ms: {p99: 500}\nmax_error_rate: 0.5\n", "slo.yaml");
  report.slo = slo;
  report.verdicts = Evaluate(slo, report.summary);
  ASSERT_EQ(report.verdicts.size(), 2u);
  EXPECT_TRUE(report.verdicts[0].no_samples);
  EXPECT_FALSE(report.verdicts[0].pass);  // still cannot pass
  EXPECT_FALSE(report.verdicts[1].no_samples);
  EXPECT_THAT(FormatVerdict(report.verdicts[0]), HasSubstr("n/a   p99 latency (ms)"));
  EXPECT_THAT(FormatVerdict(report.verdicts[0]), HasSubstr("no samples: cannot pass"));
  EXPECT_THAT(FormatVerdict(report.verdicts[1]), HasSubstr("FAIL  error rate"));
  const std::string table = FormatReport(report);
  EXPECT_THAT(table, HasSubstr("first INVALID_ARGUMENT: token id 5000 is outside the vocabulary [0, 2000)"));
  EXPECT_THAT(table, HasSubstr("      n/a      n/a"));  // the latency columns of the row
  const auto path = std::filesystem::temp_directory_path() / "lt_no_samples.json";
  ASSERT_TRUE(WriteReportJson(report, path.string()).ok());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  rapidjson::Document doc;
  doc.Parse(text.c_str());
  ASSERT_FALSE(doc.HasParseError());
  const rapidjson::Value* message = rapidjson::Pointer("/results/first_error_messages/INVALID_ARGUMENT").Get(doc);
  ASSERT_NE(message, nullptr) << text;
  EXPECT_STREQ(message->GetString(), "token id 5000 is outside the vocabulary [0, 2000)");
  std::filesystem::remove(path);
}

TEST(SloTest, VerdictsAtTheBoundariesAndGoodput) {
  auto workload = SpeechWorkload();
  auto slo = *ParseSlo("latency_ms: {p50: 50.001, p99: 98.9}\nmax_error_rate: 0.02\nmin_throughput_rps: 10\n"
                       "min_audio_seconds_per_second: 20.1\nrequest: {latency_ms: 80.001}\n",
                       "slo.yaml");
  auto good = [&](const RequestRecord& r, double audio) { return MeetsRequestSlo(slo, r, audio); };
  RunSummary s = Summarize(SyntheticRun(), *workload, "", 1, good);
  EXPECT_EQ(s.total.good, 80);  // latencies 1..80 ms meet the 80 ms per-request objective
  EXPECT_DOUBLE_EQ(s.total.goodput_rps, 8);
  std::vector<Verdict> v = Evaluate(slo, s);
  ASSERT_EQ(v.size(), 5u);
  std::map<std::string, bool> pass;
  for (const Verdict& x : v) pass[x.name] = x.pass;
  EXPECT_TRUE(pass.at("p50 latency (ms)"));      // 50 <= 50.001
  EXPECT_FALSE(pass.at("p99 latency (ms)"));     // 99 > 98.9
  EXPECT_TRUE(pass.at("error rate"));            // 0.0196 <= 0.02
  EXPECT_TRUE(pass.at("throughput (req/s)"));    // 10 >= 10
  EXPECT_FALSE(pass.at("audio-s/s (RTFx)"));     // 20 < 20.1
  EXPECT_FALSE(AllPass(v));
  EXPECT_THAT(FormatVerdict(v[1]), HasSubstr("FAIL"));

  RequestRecord r;
  r.scheduled_s = 0;
  r.done_s = 1.0;
  auto rtf = *ParseSlo("request: {max_rtf: 0.25}\n", "x");
  EXPECT_TRUE(MeetsRequestSlo(rtf, r, 4.0));   // 1 s for 4 s of audio
  EXPECT_FALSE(MeetsRequestSlo(rtf, r, 3.0));  // 1 s for 3 s: RTF 0.33
  EXPECT_TRUE(MeetsRequestSlo(rtf, r, 0.0));   // not speech
  r.code = 14;
  EXPECT_FALSE(MeetsRequestSlo(rtf, r, 4.0));  // failed requests are never good
}

TEST(SloTest, NoSuccessFailsLatencyObjectives) {
  RunSummary empty;
  empty.total.requests = 3;
  empty.total.errors = 3;
  auto v = Evaluate(*ParseSlo("latency_ms: {p99: 1000}\n", "x"), empty);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].pass);
}

constexpr char kScrapeBefore[] = R"(# HELP sluice_queue_wait_seconds Queue wait.
# TYPE sluice_queue_wait_seconds histogram
sluice_queue_wait_seconds_bucket{model="asr_ctc",le="0.005"} 1
sluice_queue_wait_seconds_bucket{model="asr_ctc",le="+Inf"} 2
sluice_queue_wait_seconds_sum{model="asr_ctc"} 0.004
sluice_queue_wait_seconds_count{model="asr_ctc"} 2
sluice_batch_compute_seconds_sum{model="asr_ctc",bucket="16000"} 0.1
sluice_batch_compute_seconds_count{model="asr_ctc",bucket="16000"} 10
sluice_real_samples_total{model="asr_ctc"} 1000
sluice_computed_samples_total{model="asr_ctc"} 2000
process_resident_memory_bytes 1.0e8
)";
constexpr char kScrapeAfter[] = R"(# TYPE sluice_queue_wait_seconds histogram
sluice_queue_wait_seconds_bucket{model="asr_ctc",le="+Inf"} 12
sluice_queue_wait_seconds_sum{model="asr_ctc"} 0.054
sluice_queue_wait_seconds_count{model="asr_ctc"} 12
sluice_batch_compute_seconds_sum{model="asr_ctc",bucket="16000"} 0.2
sluice_batch_compute_seconds_count{model="asr_ctc",bucket="16000"} 15
sluice_batch_compute_seconds_sum{model="asr_ctc",bucket="32000"} 0.3
sluice_batch_compute_seconds_count{model="asr_ctc",bucket="32000"} 5
sluice_real_samples_total{model="asr_ctc"} 4000
sluice_computed_samples_total{model="asr_ctc"} 6000
sluice_bucket_load_seconds{model="asr_ctc",bucket="16000"} 1.5
sluice_bucket_load_seconds{model="asr_ctc",bucket="32000"} 2.5
sluice_bucket_warm_seconds{model="asr_ctc",bucket="16000"} 0.25
sluice_process_peak_resident_memory_bytes 3.0e8
process_resident_memory_bytes 2.0e8
sluice_cost_usd{model="asr_ctc"} 0.5
weird_label{a="x\"y\\z",b="line\nbreak",} NaN 1700000000
)";

TEST(PrometheusTextTest, ParsesLabelsEscapesSpecialValuesAndFamilies) {
  auto scrape = ParsePrometheusText(kScrapeAfter);
  ASSERT_TRUE(scrape.ok()) << scrape.status();
  EXPECT_EQ(scrape->types.at("sluice_queue_wait_seconds"), "histogram");
  EXPECT_DOUBLE_EQ(*scrape->Sum("sluice_batch_compute_seconds_count"), 20);
  EXPECT_DOUBLE_EQ(*scrape->Sum("sluice_batch_compute_seconds_count", "bucket", "32000"), 5);
  EXPECT_FALSE(scrape->Sum("sluice_not_there").has_value());
  const PromSample& weird = scrape->samples.back();
  EXPECT_EQ(weird.Label("a"), "x\"y\\z");
  EXPECT_EQ(weird.Label("b"), "line\nbreak");
  EXPECT_TRUE(std::isnan(weird.value));
  EXPECT_THAT(scrape->HistogramFamilies(),
              ::testing::ElementsAre("sluice_batch_compute_seconds", "sluice_queue_wait_seconds"));
  auto inf = ParsePrometheusText("x_bucket{le=\"+Inf\"} +Inf\n");
  ASSERT_TRUE(inf.ok());
  EXPECT_TRUE(std::isinf(inf->samples[0].value));
  EXPECT_FALSE(ParsePrometheusText("x{a=\"1} 2\n").ok());
  EXPECT_FALSE(ParsePrometheusText("x 1 2 3\n").ok());
  EXPECT_FALSE(ParsePrometheusText("{a=\"1\"} 2\n").ok());
  EXPECT_TRUE(ParsePrometheusText("").ok());
}

TEST(PrometheusTextTest, DerivesRunFiguresFromTwoScrapesAndSkipsWhatIsAbsent) {
  ServerMetrics m;
  DeriveFromScrapes(*ParsePrometheusText(kScrapeBefore), *ParsePrometheusText(kScrapeAfter), 2.5e8, m);
  EXPECT_TRUE(m.metrics_scraped);
  EXPECT_NEAR(*m.queue_ms_mean, 5.0, 1e-9);       // (0.054 - 0.004) / (12 - 2) s
  EXPECT_NEAR(*m.compute_ms_mean, 40.0, 1e-9);    // (0.5 - 0.1) / (20 - 10) s
  EXPECT_FALSE(m.server_latency_ms_mean.has_value());
  EXPECT_FALSE(m.batch_size_mean.has_value());
  EXPECT_DOUBLE_EQ(*m.peak_rss_bytes, 3.0e8);     // the server's own peak gauge wins
  EXPECT_DOUBLE_EQ(*m.load_seconds, 4.0);
  EXPECT_DOUBLE_EQ(*m.warm_seconds, 0.25);
  EXPECT_DOUBLE_EQ(m.padding_efficiency.at("asr_ctc"), 0.75);  // 3000 real of 4000 computed during the run
  EXPECT_DOUBLE_EQ(m.cost_gauges.at("sluice_cost_usd"), 0.5);

  ServerMetrics bare;  // a server with no sluice series at all: nothing reported, nothing invented
  DeriveFromScrapes(*ParsePrometheusText("process_resident_memory_bytes 1e8\n"),
                    *ParsePrometheusText("process_resident_memory_bytes 1.2e8\n"), 1.5e8, bare);
  EXPECT_FALSE(bare.queue_ms_mean || bare.compute_ms_mean || bare.load_seconds || bare.warm_seconds);
  EXPECT_TRUE(bare.padding_efficiency.empty());
  EXPECT_DOUBLE_EQ(*bare.peak_rss_bytes, 1.5e8);  // the largest RSS seen while polling
}

TEST(OutputCompareTest, ExactCloseAndCorrupted) {
  const std::vector<double> expected = {0.5, -1.0, 2.0, 3.0, 4.0, 5.0};
  TensorComparison same = CompareTensor({1, 2, 3}, expected, {2, 3}, expected, 1e-4);
  EXPECT_TRUE(same.ok());
  EXPECT_EQ(same.max_abs_error, 0);
  std::vector<double> close = expected;
  close[3] += 5e-5;
  EXPECT_TRUE(CompareTensor({2, 3}, close, {2, 3}, expected, 1e-4).ok());
  std::vector<double> corrupted = expected;
  corrupted[1] += 0.01;
  corrupted[4] = NAN;
  TensorComparison bad = CompareTensor({1, 2, 3}, corrupted, {2, 3}, expected, 1e-4);
  EXPECT_FALSE(bad.ok());
  EXPECT_TRUE(bad.shape_matches);
  EXPECT_EQ(bad.mismatched, 2);
  EXPECT_TRUE(std::isinf(bad.max_abs_error));
  TensorComparison shape = CompareTensor({1, 3, 2}, expected, {2, 3}, expected, 1e-4);
  EXPECT_FALSE(shape.shape_matches);
  EXPECT_EQ(shape.mismatched, 6);
}

TEST(OutputCompareTest, ToleranceScalesWithTheReferencesLargestValue) {
  // Logits of magnitude ~30: an error of 2e-3 is float rounding of another graph shape at 1e-4 relative ...
  std::vector<double> logits = {30.0, -12.0, 0.25};
  std::vector<double> rounded = {30.002, -12.0, 0.25};
  TensorComparison large = CompareTensor({3}, rounded, {3}, logits, 1e-4);
  EXPECT_TRUE(large.ok());
  EXPECT_DOUBLE_EQ(large.allowed_error, 30 * 1e-4);
  // ... but not 4e-3; and below magnitude 1 the tolerance is absolute.
  rounded[0] = 30.004;
  EXPECT_FALSE(CompareTensor({3}, rounded, {3}, logits, 1e-4).ok());
  TensorComparison small = CompareTensor({2}, {0.5002, 0.1}, {2}, {0.5, 0.1}, 1e-4);
  EXPECT_DOUBLE_EQ(small.allowed_error, 1e-4);
  EXPECT_FALSE(small.ok());
}

TEST(OutputCompareTest, DecodesRawAndTypedOutputs) {
  inference::ModelInferResponse response;
  auto* a = response.add_outputs();
  a->set_name("a");
  a->set_datatype("FP32");
  a->add_shape(1);
  a->add_shape(2);
  const float values[2] = {1.5f, -2.0f};
  response.add_raw_output_contents(std::string(reinterpret_cast<const char*>(values), sizeof(values)));
  auto* b = response.add_outputs();
  b->set_name("b");
  b->set_datatype("INT64");
  b->add_shape(1);
  b->mutable_contents()->add_int64_contents(7);
  auto da = DecodeOutput(response, "a");
  ASSERT_TRUE(da.ok()) << da.status();
  EXPECT_THAT(da->values, ::testing::ElementsAre(1.5, -2.0));
  EXPECT_THAT(da->shape, ::testing::ElementsAre(1, 2));
  inference::ModelInferResponse typed;
  *typed.add_outputs() = response.outputs(1);
  EXPECT_THAT(DecodeOutput(typed, "b")->values, ::testing::ElementsAre(7.0));
  EXPECT_FALSE(DecodeOutput(typed, "c").ok());
  HostTensor t = HostTensor::Zeros(DataType::kInt64, {2});
  t.values<int64_t>()[1] = 9;
  EXPECT_THAT(*ToDoubles(t), ::testing::ElementsAre(0.0, 9.0));
}

TEST(PricingTest, ReadsThePresetsAndComputesCost) {
  auto inf2 = LoadPricingPreset(SLUICE_PRICING_YAML, "inf2.xlarge");
  ASSERT_TRUE(inf2.ok()) << inf2.status();
  EXPECT_DOUBLE_EQ(inf2->hourly_usd, 0.7582);
  EXPECT_EQ(inf2->accelerators, 2);
  EXPECT_FALSE(inf2->date.empty());
  EXPECT_FALSE(inf2->unverified);
  EXPECT_FALSE(LoadPricingPreset(SLUICE_PRICING_YAML, "p5.48xlarge").ok());

  Pricing p;
  p.hourly_usd = 3.6;
  p.accelerators = 4;
  p.accelerators_used = 1;  // a quarter of the instance: $0.90 per hour
  RunSummary s;
  s.window_s = 100;
  s.total.ok = 50;
  s.total.audio_seconds = 500;
  s.total.tokens = 1000;
  CostFigures c = ComputeCost(p, s);
  EXPECT_NEAR(c.dollars, 0.025, 1e-12);
  EXPECT_NEAR(c.usd_per_1k_success, 0.5, 1e-12);
  EXPECT_NEAR(c.audio_seconds_per_dollar, 20000, 1e-6);
  EXPECT_NEAR(c.tokens_per_dollar, 40000, 1e-6);

  const auto path = std::filesystem::temp_directory_path() / ("lt_pricing_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "presets:\n  cpu: {hourly_usd: 0.2, accelerators: 4, source: \"UNVERIFIED: memory\"}\n"
                         "  broken: {hourly_usd: -1, accelerators: 4}\n";
  EXPECT_TRUE(LoadPricingPreset(path.string(), "cpu")->unverified);
  auto broken = LoadPricingPreset(path.string(), "broken");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(std::string(broken.status().message()), HasSubstr(":3:"));
  std::filesystem::remove(path);
}

// deploy/pricing.yaml had two readers that disagreed (the server refused the `date:`/`unverified:` keys the load
// tester documents). Every shipped preset now reads the same through both entry points, and so do those keys.
TEST(PricingTest, TheServerAndTheLoadTesterReadEveryShippedPresetAlike) {
  const YAML::Node presets = YAML::LoadFile(SLUICE_PRICING_YAML)["presets"];
  ASSERT_TRUE(presets.IsMap());
  ASSERT_GE(presets.size(), 2u);
  auto server_read = [](const std::string& file, const std::string& name) {
    absl::StatusOr<YamlNode> node =
        YamlNode::LoadString("{preset: " + name + ", pricing_file: " + file + "}", "server.yaml");
    EXPECT_TRUE(node.ok());
    return ParseCostConfig(*node, "/");
  };
  for (const auto& entry : presets) {
    const std::string name = entry.first.as<std::string>();
    absl::StatusOr<Pricing> tester = LoadPricingPreset(SLUICE_PRICING_YAML, name);
    absl::StatusOr<CostConfig> server = server_read(SLUICE_PRICING_YAML, name);
    ASSERT_TRUE(tester.ok()) << name << ": " << tester.status();
    ASSERT_TRUE(server.ok()) << name << ": " << server.status();
    EXPECT_EQ(tester->hourly_usd, server->hourly_usd) << name;
    EXPECT_EQ(tester->accelerators, server->accelerators) << name;
    EXPECT_EQ(tester->source, server->source) << name;
    EXPECT_EQ(tester->date, server->date) << name;
    EXPECT_FALSE(tester->date.empty()) << name;  // the file's snapshot date
    EXPECT_EQ(tester->unverified, server->unverified) << name;
  }
  EXPECT_TRUE(LoadPricingPreset(SLUICE_PRICING_YAML, "c7i.xlarge")->unverified);  // its source says so

  const auto path = std::filesystem::temp_directory_path() / ("lt_pricing_keys_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "presets:\n"
                         "  dated: {hourly_usd: 1.5, accelerators: 2, source: quote, date: \"2026-02-01\", unverified: true}\n"
                         "  typo: {hourly_usd: 1.5, accelerators: 2, source: quote, hourly_usdd: 2}\n";
  absl::StatusOr<Pricing> tester = LoadPricingPreset(path.string(), "dated");
  absl::StatusOr<CostConfig> server = server_read(path.string(), "dated");
  ASSERT_TRUE(tester.ok()) << tester.status();
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(tester->date, "2026-02-01");
  EXPECT_EQ(server->date, "2026-02-01");
  EXPECT_TRUE(tester->unverified);
  EXPECT_TRUE(server->unverified);
  // A misspelt key is refused by both, by name (it was ignored by one and refused by the other).
  EXPECT_THAT(std::string(LoadPricingPreset(path.string(), "typo").status().message()), HasSubstr("hourly_usdd"));
  EXPECT_THAT(std::string(server_read(path.string(), "typo").status().message()), HasSubstr("hourly_usdd"));
  std::filesystem::remove(path);
}

// Found by tests/fuzz/fuzz_pricing_yaml: a NaN or infinite price passed, and 4294967296 accelerators became 0.
TEST(PricingTest, RefusesPricesThatAreNotFiniteAndCountsAnIntCannotHold) {
  const auto path = std::filesystem::temp_directory_path() / ("lt_pricing_bad_" + std::to_string(::getpid()) + ".yaml");
  std::ofstream(path) << "presets:\n  nan: {hourly_usd: .nan, accelerators: 4}\n  inf: {hourly_usd: .inf, accelerators: 4}\n"
                         "  wide: {hourly_usd: 1, accelerators: 4294967296}\n";
  EXPECT_THAT(std::string(LoadPricingPreset(path.string(), "nan").status().message()),
              HasSubstr("must be a positive price"));
  EXPECT_THAT(std::string(LoadPricingPreset(path.string(), "inf").status().message()),
              HasSubstr("must be a positive price"));
  EXPECT_THAT(std::string(LoadPricingPreset(path.string(), "wide").status().message()),
              HasSubstr("must be between 1 and 2147483647"));
  std::filesystem::remove(path);
}

Report SyntheticReport(double latency_scale, bool with_cost) {
  static auto workload = SpeechWorkload();
  RunResult run = SyntheticRun();
  for (RequestRecord& r : run.records) r.done_s = r.scheduled_s + (r.done_s - r.scheduled_s) * latency_scale;
  Report report;
  report.target = "127.0.0.1:1";
  report.models.push_back({"asr_ctc", "speech", "fixed:32000", 1.0, 256000, 16000, false});
  report.summary = Summarize(run, *workload, "", 1, nullptr);
  report.slo = *ParseSlo("latency_ms: {p99: 150}\n", "x");
  report.verdicts = Evaluate(*report.slo, report.summary);
  if (with_cost) {
    Pricing pricing;
    pricing.preset = "inf2.xlarge";
    pricing.hourly_usd = 0.7582;
    pricing.accelerators = 2;
    report.pricing = pricing;
    report.cost = ComputeCost(*report.pricing, report.summary);
  }
  report.server = ServerMetrics();
  report.server->model_stats.push_back({"asr_ctc", 100, 40, 2.0, 10.0, 12.5, 2.5});
  report.timeline = BuildTimeline(run, 1.0);
  report.histogram = BuildHistogram(run, 20);
  VerifyReport v;
  v.model = "asr_ctc";
  v.cases = 4;
  v.max_abs_error = 3e-6 * latency_scale;
  report.verify.push_back(v);
  return report;
}

TEST(ReportJsonTest, HasTheDocumentedFields) {
  const std::string json = ReportToJson(SyntheticReport(1.0, true));
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  for (const char* pointer :
       {"/schema", "/config/target", "/config/models/0/name", "/config/models/0/sample_rate", "/run/mode",
        "/run/window_s", "/results/requests", "/results/ok", "/results/errors", "/results/errors_by_code",
        "/results/error_rate", "/results/req_per_s", "/results/goodput_rps", "/results/audio_s_per_s",
        "/results/latency_ms/p50", "/results/latency_ms/p90", "/results/latency_ms/p95", "/results/latency_ms/p99",
        "/results/latency_ms/max", "/per_model/0/model", "/slo/pass", "/slo/verdicts/0/name", "/cost/dollars",
        "/cost/usd_per_1k_success", "/cost/audio_seconds_per_dollar", "/server/model_stats/0/queue_ms_mean",
        "/verify/0/max_abs_error", "/timeline/0/p99_ms", "/histogram/counts"}) {
    EXPECT_NE(rapidjson::Pointer(pointer).Get(doc), nullptr) << pointer;
  }
  EXPECT_EQ(doc["results"]["requests"].GetInt64(), 102);
  EXPECT_EQ(doc["results"]["errors_by_code"]["DEADLINE_EXCEEDED"].GetInt64(), 1);
  EXPECT_DOUBLE_EQ(doc["results"]["latency_ms"]["p99"].GetDouble(), 99);
  EXPECT_TRUE(doc["slo"]["pass"].GetBool());
  EXPECT_EQ(rapidjson::Pointer("/server/peak_rss_bytes").Get(doc), nullptr);  // absent, not 0
  int64_t binned = 0;
  for (const auto& c : doc["histogram"]["counts"].GetArray()) binned += c.GetInt64();
  EXPECT_EQ(binned, 100);
}

TEST(ReportTest, TableAndSvgSayWhatTheyShow) {
  Report report = SyntheticReport(1.0, true);
  const std::string table = FormatReport(report);
  EXPECT_THAT(table, HasSubstr("DEADLINE_EXCEEDED 1"));
  EXPECT_THAT(table, HasSubstr("per 1k successful"));
  EXPECT_THAT(table, HasSubstr("SLO PASS"));
  EXPECT_THAT(table, HasSubstr("verify asr_ctc: PASS"));
  const std::string svg = RenderSvg(report);
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("Latency histogram"));
  EXPECT_THAT(svg, HasSubstr("</svg>"));
}

TEST(CompareTest, SideBySideWithRatiosAndWinners) {
  const std::string a = ReportToJson(SyntheticReport(1.0, true));
  const std::string b = ReportToJson(SyntheticReport(2.0, false));
  auto table = CompareReports(a, b, "a.json", "b.json");
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_THAT(*table, HasSubstr("B/A"));
  // p99 doubles in B: ratio 2.000, A better.
  EXPECT_THAT(*table, ::testing::ContainsRegex("latency p99 \\(ms\\) +99\\.00 +198\\.00 +2\\.000 +A"));
  EXPECT_THAT(*table, ::testing::ContainsRegex("throughput \\(req/s\\) +10\\.00 +10\\.00 +1\\.000 +="));
  EXPECT_THAT(*table, ::testing::ContainsRegex("\\$ per 1k successful +[0-9.]+ +- +-"));  // B has no cost
  EXPECT_THAT(*table, ::testing::ContainsRegex("server queue \\(ms\\) +2\\.00 +2\\.00"));
  EXPECT_THAT(*table, HasSubstr("verify max abs error"));
  EXPECT_FALSE(CompareReports("{}", b, "x", "y").ok());
  EXPECT_FALSE(CompareReports("not json", b, "x", "y").ok());
}

TEST(SweepTest, LevelsVerdictsAndTheBestPassingStep) {
  SweepOptions o;
  o.knob = "concurrency";
  o.start = 1;
  o.factor = 2;
  o.steps = 5;
  EXPECT_THAT(*SweepLevels(o), ::testing::ElementsAre(1, 2, 4, 8, 16));
  o.levels = {4, 2};
  EXPECT_FALSE(SweepLevels(o).ok());
  o.levels.clear();
  o.knob = "threads";
  EXPECT_FALSE(SweepLevels(o).ok());

  // Throughput rises with the level, p99 too; the SLO (p99 <= 50 ms) breaks at level 8.
  o.knob = "concurrency";
  auto slo = *ParseSlo("latency_ms: {p99: 50}\n", "x");
  std::vector<double> measured;
  auto measure = [&](double level) -> absl::StatusOr<RunSummary> {
    measured.push_back(level);
    RunSummary s;
    s.total.requests = s.total.ok = 100;
    s.total.req_per_s = 10 * level;
    s.total.latency.count = 100;
    s.total.latency.p99_ms = 10 * level;
    return s;
  };
  std::vector<SweepStep> steps;
  std::optional<size_t> best;
  ASSERT_TRUE(RunSweep(o, slo, measure, steps, best).ok());
  EXPECT_THAT(measured, ::testing::ElementsAre(1, 2, 4, 8));  // stops at the first failure
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(steps[*best].level, 4);

  // A rate sweep also fails when the server delivers under 90 % of the offered rate.
  RunSummary saturated;
  saturated.total.requests = saturated.total.ok = 10;
  saturated.total.req_per_s = 80;
  auto v = SweepVerdicts(SloSpec(), "rate", 100, saturated);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_FALSE(v[0].pass);
}

}  // namespace
}  // namespace sluice::loadtest
