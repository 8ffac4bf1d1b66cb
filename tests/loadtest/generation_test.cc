// sluice-loadtest's generation mode without a server: the OpenAI streaming wire format (body, SSE framing, chunk
// decoding), the usage check, the request plan, the generation summary (TTFT, ITL, TPOT, goodput), the new SLO
// keys, the server's generation figures from two /metrics scrapes, and --verify's token comparison.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "loadtest/core/slo.h"
#include "loadtest/generation/generation_plan.h"
#include "loadtest/generation/generation_summary.h"
#include "loadtest/generation/openai_stream.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/monitor/prometheus_text.h"
#include "loadtest/monitor/server_monitor.h"

namespace sluice::loadtest {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SseParserTest, SplitsEventsAcrossFeedsAndLineEnds) {
  SseParser parser;
  EXPECT_TRUE(parser.Feed("data: {\"a\"").empty());
  EXPECT_THAT(parser.Feed(":1}\n\ndata: x\r\n\r\n: comment\n\nevent: e\ndata: one\ndata: two\n"),
              ElementsAre("{\"a\":1}", "x"));
  EXPECT_THAT(parser.Feed("\ndata:[DONE]\n\n"), ElementsAre("one\ntwo", "[DONE]"));
}

TEST(OpenAiChunkTest, DecodesTextDeltaUsageErrorAndDone) {
  auto text = ParseOpenAiChunk(R"({"choices":[{"index":0,"text":" river","finish_reason":null}]})");
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->text, " river");
  EXPECT_FALSE(text->finish_reason);
  auto delta = ParseOpenAiChunk(R"({"choices":[{"delta":{"content":"hi"},"finish_reason":"length"}]})");
  ASSERT_TRUE(delta.ok());
  EXPECT_EQ(delta->text, "hi");
  EXPECT_EQ(delta->finish_reason, "length");
  auto usage = ParseOpenAiChunk(R"({"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3}})");
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->prompt_tokens, 7);
  EXPECT_EQ(usage->completion_tokens, 3);
  EXPECT_FALSE(usage->text);
  auto error = ParseOpenAiChunk(R"({"error":{"message":"boom","type":"server_error"}})");
  ASSERT_TRUE(error.ok());
  EXPECT_EQ(error->error_message, "boom");
  EXPECT_TRUE(ParseOpenAiChunk("[DONE]")->done);
  EXPECT_FALSE(ParseOpenAiChunk("not json").ok());
}

TEST(OpenAiBodyTest, CarriesIdsMaxTokensIgnoreEosAndUsage) {
  GenerationSpec spec;
  spec.model = "m";
  spec.prompt_ids = {1, 20, 300};
  spec.max_tokens = 16;
  spec.ignore_eos = true;
  spec.temperature = 0.0;
  spec.seed = 9;
  rapidjson::Document doc;
  doc.Parse(EncodeOpenAiCompletionBody(spec).c_str());
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_STREQ(doc["model"].GetString(), "m");
  ASSERT_TRUE(doc["prompt"].IsArray());
  EXPECT_EQ(doc["prompt"].Size(), 3u);
  EXPECT_EQ(doc["prompt"][2].GetInt(), 300);
  EXPECT_EQ(doc["max_tokens"].GetInt(), 16);
  EXPECT_TRUE(doc["ignore_eos"].GetBool());
  EXPECT_EQ(doc["temperature"].GetDouble(), 0.0);
  EXPECT_EQ(doc["seed"].GetInt(), 9);
  EXPECT_TRUE(doc["stream"].GetBool());
  EXPECT_TRUE(doc["stream_options"]["include_usage"].GetBool());
  EXPECT_STREQ(OpenAiPath(spec), "/v1/completions");

  spec.prompt_ids.clear();
  spec.prompt_text = "Hello";
  spec.chat = true;
  doc.Parse(EncodeOpenAiCompletionBody(spec).c_str());
  EXPECT_STREQ(doc["messages"][0]["content"].GetString(), "Hello");
  EXPECT_STREQ(OpenAiPath(spec), "/v1/chat/completions");
}

TEST(OpenAiBodyTest, SpecSurvivesTheRunnerCall) {
  GenerationSpec spec;
  spec.model = "m";
  spec.prompt_ids = {5, 6, 7, 8};
  spec.max_tokens = 32;
  spec.ignore_eos = true;
  spec.seed = 4;
  absl::StatusOr<GenerationSpec> back = GenerationSpecFromCall(GenerationSpecToCall(spec));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->prompt_ids, spec.prompt_ids);
  EXPECT_EQ(back->max_tokens, 32);
  EXPECT_TRUE(back->ignore_eos);
  EXPECT_EQ(back->seed, 4);
  EXPECT_FALSE(back->temperature);
}

// A stream as the server writes it: text chunks, the finish chunk, the usage chunk, [DONE].
std::string Stream(const std::vector<std::string>& pieces, int prompt_tokens, int completion_tokens) {
  std::string out;
  for (const std::string& p : pieces) out += "data: {\"choices\":[{\"text\":\"" + p + "\",\"finish_reason\":null}]}\n\n";
  out += "data: {\"choices\":[{\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n";
  out += "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":" + std::to_string(prompt_tokens) +
         ",\"completion_tokens\":" + std::to_string(completion_tokens) + "}}\n\n";
  return out + "data: [DONE]\n\n";
}

TEST(JudgeStreamTest, AcceptsAMatchingStreamAndNamesEachMismatch) {
  GenerationSpec spec;
  spec.prompt_ids = {1, 2, 3};
  spec.max_tokens = 3;
  spec.ignore_eos = true;
  auto judge = [&](const std::string& bytes) {
    OpenAiStreamState state;
    // Byte by byte: event boundaries fall anywhere.
    for (size_t i = 0; i < bytes.size(); ++i) state.Feed(bytes.substr(i, 1), 0.01 * i);
    StreamVerdict verdict = JudgeStream(state.outcome(), spec);
    return std::make_pair(verdict, state.Take());
  };
  auto [ok, outcome] = judge(Stream({"a", "b", "c"}, 3, 3));
  EXPECT_EQ(ok.code, 0) << ok.message;
  EXPECT_EQ(outcome.text, "abc");
  EXPECT_EQ(outcome.chunks(), 3);
  EXPECT_LT(outcome.chunk_times_s[0], outcome.chunk_times_s[1]);
  EXPECT_EQ(outcome.finish_reason, "length");
  // Merged chunks (fewer than tokens) are allowed.
  EXPECT_EQ(judge(Stream({"ab", "c"}, 3, 3)).first.code, 0);

  auto wrong_prompt = judge(Stream({"a", "b", "c"}, 4, 3)).first;
  EXPECT_EQ(wrong_prompt.code, kUsageMismatchCode);
  EXPECT_THAT(wrong_prompt.message, HasSubstr("prompt_tokens 4"));
  EXPECT_EQ(judge(Stream({"a", "b"}, 3, 2)).first.code, kUsageMismatchCode);  // ignore_eos: 2 != max_tokens 3
  spec.max_tokens = 5;
  spec.ignore_eos = false;
  auto too_many_chunks = judge(Stream({"a", "b", "c"}, 3, 2)).first;
  EXPECT_EQ(too_many_chunks.code, kUsageMismatchCode);
  EXPECT_THAT(too_many_chunks.message, HasSubstr("3 content chunks"));
  EXPECT_EQ(judge(Stream({"a"}, 3, 6)).first.code, kUsageMismatchCode);  // over max_tokens
  EXPECT_EQ(judge("data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n").first.code, kUsageMismatchCode);
  EXPECT_EQ(judge("data: {\"choices\":[{\"text\":\"a\"}]}\n\n").first.code, 14);  // no [DONE]: UNAVAILABLE
  EXPECT_EQ(judge("data: {\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n").first.code,
            13);
  EXPECT_EQ(GrpcCodeName(kUsageMismatchCode), "USAGE_MISMATCH");
}

TEST(JudgeStreamTest, OutcomeSurvivesTheRunnerOutcome) {
  GenerationOutcome o;
  o.chunk_times_s = {0.1, 0.15, 0.2};
  o.text = "xyz";
  o.prompt_tokens = 4;
  o.completion_tokens = 3;
  o.finish_reason = "length";
  const Outcome carried = GenerationOutcomeToOutcome(o, StreamVerdict());
  EXPECT_TRUE(carried.ok());
  const GenerationOutcome back = GenerationOutcomeOf(carried);
  EXPECT_EQ(back.chunk_times_s, o.chunk_times_s);
  EXPECT_EQ(back.text, "xyz");
  EXPECT_EQ(back.prompt_tokens, 4);
  EXPECT_EQ(back.completion_tokens, 3);
}

TEST(GenerationPlanTest, RepeatableCorpusWindowsAndOutputLengths) {
  GenerationPlanOptions options;
  options.model = "m";
  options.output_tokens = "uniform:4-9";
  options.corpus_ids = {10, 11, 12, 13, 14};
  auto plan = GenerationPlan::Create(options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<int32_t> drawn(7, 1);  // a drawn prompt of 7 ids: longer than the corpus, so it wraps
  std::set<int64_t> lengths;
  for (uint64_t i = 0; i < 50; ++i) {
    const GenerationSpec a = (*plan)->Make(i, drawn), b = (*plan)->Make(i, drawn);
    EXPECT_EQ(a.prompt_ids, b.prompt_ids);
    EXPECT_EQ(a.max_tokens, b.max_tokens);
    ASSERT_EQ(a.prompt_ids.size(), 7u);
    for (size_t k = 1; k < a.prompt_ids.size(); ++k) {
      EXPECT_EQ(a.prompt_ids[k], 10 + (a.prompt_ids[k - 1] - 10 + 1) % 5);  // consecutive corpus ids
    }
    EXPECT_TRUE(a.ignore_eos);
    lengths.insert(a.max_tokens);
  }
  EXPECT_EQ(*lengths.begin(), 4);
  EXPECT_EQ(*lengths.rbegin(), 9);

  options.corpus_ids.clear();  // synthetic: the drawn ids themselves
  auto synthetic = GenerationPlan::Create(options);
  EXPECT_EQ((*synthetic)->Make(3, {4, 5}).prompt_ids, (std::vector<int32_t>{4, 5}));
  GenerationPlanOptions bad = options;
  bad.output_tokens = "banana";
  EXPECT_FALSE(GenerationPlan::Create(bad).ok());
}

TEST(GenerationPlanTest, PromptFile) {
  const std::string path = (std::filesystem::temp_directory_path() / "sluice_prompts_test.txt").string();
  std::ofstream(path) << "first prompt\n\n  \nsecond\\nline\n";
  auto prompts = ReadPromptFile(path);
  ASSERT_TRUE(prompts.ok());
  EXPECT_THAT(*prompts, ElementsAre("first prompt", "second\nline"));
  GenerationPlanOptions options;
  options.model = "m";
  options.prompts_file = path;
  options.chat = true;
  auto plan = GenerationPlan::Create(options);
  ASSERT_TRUE(plan.ok());
  const GenerationSpec spec = (*plan)->Make(0, {1, 2, 3});
  EXPECT_TRUE(spec.prompt_ids.empty());
  EXPECT_THAT(spec.prompt_text, ::testing::AnyOf("first prompt", "second\nline"));
  EXPECT_FALSE(ReadPromptFile(path + ".missing").ok());
}

// Two requests: one closed-loop (sent when scheduled), one sent 50 ms late.
TEST(GenerationSummaryTest, TtftItlTpotGoodputAndTimeline) {
  RunResult run;
  run.measure_start_s = 0;
  run.measure_end_s = 2.0;
  RequestRecord a{.index = 0, .scheduled_s = 0.0, .sent_s = 0.0, .done_s = 1.0, .code = 0, .measured = true};
  RequestRecord b{.index = 1, .scheduled_s = 0.5, .sent_s = 0.55, .done_s = 2.0, .code = 0, .measured = true};
  RequestRecord bad{.index = 2, .scheduled_s = 0.5, .sent_s = 0.5, .done_s = 0.6, .code = kUsageMismatchCode,
                    .measured = true};
  RequestRecord warm{.index = 3, .scheduled_s = 0, .sent_s = 0, .done_s = 0.1, .code = 0, .measured = false};
  run.records = {a, b, bad, warm};
  absl::flat_hash_map<uint64_t, GenerationOutcome> outcomes;
  outcomes[0].chunk_times_s = {0.2, 0.4, 0.7, 1.0};
  outcomes[0].prompt_tokens = 10;
  outcomes[0].completion_tokens = 4;
  outcomes[1].chunk_times_s = {0.45, 1.45};  // 2 chunks, 3 tokens: merged
  outcomes[1].prompt_tokens = 20;
  outcomes[1].completion_tokens = 3;
  outcomes[3].chunk_times_s = {0.05};
  SloSpec slo;
  slo.request_ttft_ms = 400;  // a: 200 ms passes; b: 50 + 450 = 500 ms fails
  const GenerationStats g = SummarizeGeneration(run, outcomes, slo);
  EXPECT_EQ(g.requests, 2);
  EXPECT_EQ(g.prompt_tokens, 30);
  EXPECT_EQ(g.output_tokens, 7);
  EXPECT_DOUBLE_EQ(g.output_tokens_per_s, 3.5);
  EXPECT_EQ(g.ttft.count, 2);
  EXPECT_NEAR(g.ttft.min_ms, 200, 1e-9);
  EXPECT_NEAR(g.ttft.max_ms, 500, 1e-9);
  EXPECT_EQ(g.itl.count, 4);  // 3 gaps of a, 1 of b
  EXPECT_NEAR(g.itl.max_ms, 1000, 1e-9);
  // TPOT: a (1000 - 200) / 3; b (1500 - 500) / 2.
  EXPECT_NEAR(g.tpot.min_ms, 800.0 / 3, 1e-9);
  EXPECT_NEAR(g.tpot.max_ms, 500, 1e-9);
  EXPECT_EQ(g.e2e.count, 2);
  EXPECT_EQ(g.good, 1);
  EXPECT_DOUBLE_EQ(g.goodput_rps, 0.5);
  EXPECT_EQ(g.usage_mismatches, 1);
  EXPECT_EQ(g.merged_chunks, 1);
  double timeline = 0;
  for (double v : g.output_tokens_timeline) timeline += v;
  EXPECT_NEAR(timeline, 7, 1e-9);

  const GenerationSamples samples = GenerationLatencySamples(run, outcomes);
  EXPECT_EQ(samples.ttft_ms.size(), 2u);
  EXPECT_EQ(samples.itl_ms.size(), 4u);
  const Histogram h = LogHistogram(samples.itl_ms, 5);
  ASSERT_EQ(h.counts.size(), 5u);
  int64_t total = 0;
  for (int64_t c : h.counts) total += c;
  EXPECT_EQ(total, 4);
}

TEST(GenerationSloTest, ParsesAndJudgesGenerationKeys) {
  auto slo = ParseSlo("ttft_ms: {p99: 300}\ntpot_ms: {p50: 20}\nitl_ms: {max: 90}\nmin_output_tokens_per_s: 100\n"
                      "request: {ttft_ms: 500, tpot_ms: 50}\n", "test");
  ASSERT_TRUE(slo.ok()) << slo.status();
  EXPECT_EQ(slo->ttft_ms.at("p99"), 300);
  EXPECT_EQ(slo->request_tpot_ms, 50);
  EXPECT_FALSE(slo->empty());
  EXPECT_FALSE(ParseSlo("ttft_ms: {p98: 1}\n", "test").ok());
  EXPECT_TRUE(MeetsGenerationSlo(*slo, 400, 40.0, 10000));
  EXPECT_FALSE(MeetsGenerationSlo(*slo, 600, 40.0, 10000));
  EXPECT_FALSE(MeetsGenerationSlo(*slo, 400, 60.0, 10000));
  EXPECT_TRUE(MeetsGenerationSlo(*slo, 400, std::nullopt, 10000));

  RunSummary summary;
  summary.total.requests = 10;
  GenerationStats g;
  g.ttft.count = g.tpot.count = g.itl.count = 10;
  g.ttft.p99_ms = 250;
  g.tpot.p50_ms = 25;  // over 20: fails
  g.itl.max_ms = 80;
  g.output_tokens_per_s = 150;
  summary.generation = g;
  const std::vector<Verdict> verdicts = Evaluate(*slo, summary);
  ASSERT_EQ(verdicts.size(), 4u);
  int failed = 0;
  for (const Verdict& v : verdicts) failed += v.pass ? 0 : 1;
  EXPECT_EQ(failed, 1);
  summary.generation.reset();  // a run without generation figures cannot pass them
  EXPECT_FALSE(AllPass(Evaluate(*slo, summary)));
}

TEST(GenerationServerTest, DerivesFiguresFromTwoScrapes) {
  const auto before = ParsePrometheusText(
      "sluice_generation_requests_total{model=\"m\",outcome=\"ok\"} 5\n"
      "sluice_generation_output_tokens_total{model=\"m\"} 50\n"
      "sluice_generation_queue_time_seconds_sum{model=\"m\"} 1\n"
      "sluice_generation_queue_time_seconds_count{model=\"m\"} 5\n"
      "sluice_generation_decode_rows_total{model=\"m\"} 10\n"
      "sluice_generation_step_seconds_count{model=\"m\",step=\"decode\"} 10\n"
      "sluice_generation_running{model=\"m\"} 0\nsluice_generation_kv_slots{model=\"m\"} 4\n");
  const auto after = ParsePrometheusText(
      "sluice_generation_requests_total{model=\"m\",outcome=\"ok\"} 15\n"
      "sluice_generation_requests_total{model=\"m\",outcome=\"rejected\"} 2\n"
      "sluice_generation_output_tokens_total{model=\"m\"} 250\n"
      "sluice_generation_queue_time_seconds_sum{model=\"m\"} 1.5\n"
      "sluice_generation_queue_time_seconds_count{model=\"m\"} 15\n"
      "sluice_generation_decode_rows_total{model=\"m\"} 70\n"
      "sluice_generation_step_seconds_count{model=\"m\",step=\"decode\"} 30\n"
      "sluice_generation_step_seconds_count{model=\"m\",step=\"prefill\"} 12\n"
      "sluice_generation_running{model=\"m\"} 1\nsluice_generation_kv_slots{model=\"m\"} 4\n");
  ASSERT_TRUE(before.ok() && after.ok());
  ServerMetrics m;
  DeriveGeneration(*before, *after, {{"sluice_generation_running", 3}}, m);
  EXPECT_EQ(m.generation.at("requests"), 12);
  EXPECT_EQ(m.generation.at("requests_ok"), 10);
  EXPECT_EQ(m.generation.at("output_tokens"), 200);
  EXPECT_NEAR(m.generation.at("queue_ms_mean"), 50, 1e-9);
  EXPECT_NEAR(m.generation.at("decode_batch_mean"), 3, 1e-9);
  EXPECT_EQ(m.generation.at("running_peak"), 3);
  EXPECT_EQ(m.generation.at("kv_slots"), 4);
  ServerMetrics none;
  DeriveGeneration(*before, *before, {}, none);
  EXPECT_EQ(none.generation.at("requests"), 0);
  ServerMetrics absent;
  DeriveGeneration(*ParsePrometheusText("up 1\n"), *ParsePrometheusText("up 1\n"), {}, absent);
  EXPECT_TRUE(absent.generation.empty());
}

TEST(GenerationVerifyTest, FirstMismatchedToken) {
  EXPECT_EQ(FirstMismatchedToken({"The", " river", "", "é"}, "The riveré"), -1);
  EXPECT_EQ(FirstMismatchedToken({"The", " river", " flows"}, "The rover flows"), 1);
  EXPECT_EQ(FirstMismatchedToken({"The", " river"}, "The river and more"), 2);
  EXPECT_EQ(FirstMismatchedToken({"The", " river"}, "The"), 1);
}

}  // namespace
}  // namespace sluice::loadtest
