// sluice-loadtest --api openai and --api triton-stream end to end: the real sluice-server on 127.0.0.1 serving a
// generation model on the `sim` device (tokenizer trained here by backend/compile/llm_tokenizer.py), and a tensor
// model beside it, driven by the real sluice-loadtest binary. openai: the request and token counts against the
// server's own /metrics, that every request's usage matched what was streamed and asked (no USAGE_MISMATCH),
// TTFT/ITL/TPOT figures, the JSON and SVG, the SLO exit code, the open loop, a sweep, prompts from a file over chat,
// and --compare. triton-stream (ModelStreamInfer over gRPC): the same counts against the server's (prompt tokens
// equal to the openai run's with the same seed: text prompts sized to the drawn lengths), zero errors, the open
// loop and SLO, refusals counted by their code, deadlines and the run's cap cancelling streams (the server frees
// every slot), and clear errors for an unknown model, a model that does not generate, HTTP and a missing tokenizer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

constexpr char kModel[] = "tiny_sim";

struct Result {
  int exit_code = -1;
  std::string output;
};

Result Shell(const std::string& command) {
  Result result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// A generation model on the sim device: 4 KV slots, 10 ms per step (so that TTFT and ITL are well above noise).
void WriteSimRepository(const std::filesystem::path& root) {
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / kModel);
  const Result trained = Shell(std::string(SLUICE_PYTHON) + " " + SLUICE_SOURCE_DIR +
                               "/backend/compile/llm_tokenizer.py " + (root / kModel).string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  std::ofstream(root / kModel / "config.yaml")
      << "name: " << kModel << "\nkind: generation\ngeneration:\n  tokenizer: tokenizer.model\n  vocab_size: 2000\n"
      << "  context_length: 256\n  kv_cache: {slots: 4, layers: 1, kv_heads: 1, head_dim: 8}\n"
      << "  prefill_lengths: [16, 64, 128]\n  decode_batch_sizes: [1, 2, 4]\n  kv_lengths: [128, 256]\n"
      << "  bos_token_id: 1\n  eos_token_id: 2\n  max_num_seqs: 4\n  prefill_token_budget: 128\n"
      << "  max_queue_size: 64\n  default_max_tokens: 12\n"
      << "instances: [{count: 1, device: sim}]\nsim: {base_ms: 5, per_sample_us: 0}\n";
  // A model that is not a generation model (--api triton-stream must refuse it before any load).
  std::filesystem::create_directories(root / "embed_sim");
  std::ofstream(root / "embed_sim" / "config.yaml")
      << "name: embed_sim\nkind: text\n"
         "inputs:\n  - {name: input_ids, dtype: INT64, shape: [-1]}\n"
         "outputs:\n  - {name: embedding, dtype: FP32, shape: [8]}\n"
         "buckets: {lengths: [32, 64], batch_sizes: [1, 4]}\n"
         "batching: {max_queue_delay_ms: 1, max_queue_size: 64}\n"
         "instances: [{count: 1, device: sim}]\n"
         "sim: {base_ms: 1, per_sample_us: 0, output_steps_per_input_step: 1}\n";
}

class GenerationE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    WriteSimRepository(SLUICE_GEN_MODELS_DIR);
    if (::testing::Test::HasFatalFailure()) return;
    testing::ServerProcess::Options options;
    options.source_repository = SLUICE_GEN_MODELS_DIR;
    server_ = new testing::ServerProcess(options);
    ASSERT_TRUE(server_->ready()) << server_->Log();
  }
  static void TearDownTestSuite() { delete server_; }

  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static std::string Path(const std::string& name) { return (server_->dir() / name).string(); }

  static Result Run(const std::string& args) {
    return Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api openai -m " + kModel + " -u " +
                 server_->http_address() + " --model-repository " + SLUICE_GEN_MODELS_DIR + " " + args);
  }

  static rapidjson::Document Json(const std::string& path) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    rapidjson::Document doc;
    doc.Parse(text.c_str());
    EXPECT_FALSE(doc.HasParseError()) << path;
    return doc;
  }

  static double Number(const rapidjson::Value& doc, const char* pointer) {
    const rapidjson::Value* v = rapidjson::Pointer(pointer).Get(doc);
    EXPECT_NE(v, nullptr) << pointer;
    return v != nullptr && v->IsNumber() ? v->GetDouble() : NAN;
  }

  static Result RunTriton(const std::string& args, const std::string& model = kModel) {
    return Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api triton-stream -m " + model + " -u " +
                 server_->grpc_address() + " --metrics-url http://" + server_->http_address() + "/metrics" +
                 " --model-repository " + SLUICE_GEN_MODELS_DIR + " " + args);
  }

  // The sum of a series over its labels, read from the server's /metrics.
  static double ServerSeries(const std::string& name) {
    httplib::Client client("http://" + server_->http_address());
    httplib::Result page = client.Get("/metrics");
    EXPECT_TRUE(page && page->status == 200);
    if (!page) return NAN;
    double total = 0;
    std::regex line("^" + name + R"((\{[^}]*\})? ([0-9.e+-]+)$)");
    std::istringstream in(page->body);
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      if (std::regex_match(l, m, line)) total += std::stod(m[2]);
    }
    return total;
  }

  // The server's sluice_generation_requests_total (every outcome).
  static double ServerRequests() { return ServerSeries("sluice_generation_requests_total"); }

  // Waits (up to 5 s) until the server holds no sequence: every slot freed.
  static bool ServerIdle() {
    for (int i = 0; i < 50; ++i) {
      if (ServerSeries("sluice_generation_running") == 0 && ServerSeries("sluice_generation_kv_slots_in_use") == 0) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  static inline testing::ServerProcess* server_ = nullptr;
};

TEST_F(GenerationE2eTest, ClosedLoopCountsTokensAndMatchesTheServer) {
  const double before = ServerRequests();
  const std::string json = Path("closed.json"), svg = Path("closed.svg");
  Result r = Run("-c 4 -n 40 --prompt-tokens uniform:8-40 --output-tokens fixed:16 --json " + json + " --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("TTFT"));
  EXPECT_THAT(r.output, HasSubstr("real text"));  // the repository's tokenizer made the prompts
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/requests"), 40);
  EXPECT_EQ(Number(doc, "/results/ok"), 40);
  EXPECT_EQ(Number(doc, "/results/generation/requests"), 40);
  EXPECT_EQ(Number(doc, "/results/generation/usage_mismatches"), 0);
  EXPECT_EQ(Number(doc, "/results/generation/output_tokens"), 40 * 16);  // ignore_eos: exactly max_tokens each
  const double prompt_tokens = Number(doc, "/results/generation/prompt_tokens");
  EXPECT_GE(prompt_tokens, 40 * 8);
  EXPECT_LE(prompt_tokens, 40 * 40);
  EXPECT_EQ(Number(doc, "/results/generation/ttft_ms/count"), 40);
  EXPECT_EQ(Number(doc, "/results/generation/tpot_ms/count"), 40);
  EXPECT_GT(Number(doc, "/results/generation/itl_ms/count"), 0);
  // Each step costs >= 5 ms on the sim: so does every TPOT, and the first token (a prefill) too.
  EXPECT_GE(Number(doc, "/results/generation/tpot_ms/p50"), 4.5);
  EXPECT_GE(Number(doc, "/results/generation/ttft_ms/min"), 4.5);
  EXPECT_GT(Number(doc, "/results/generation/output_tokens_per_s"), 0);
  // The server saw exactly these requests and tokens (its counters, read after the run).
  EXPECT_EQ(ServerRequests() - before, 40);
  EXPECT_EQ(Number(doc, "/server/generation/output_tokens"), 40 * 16);
  EXPECT_EQ(Number(doc, "/server/generation/requests"), 40);
  EXPECT_LE(Number(doc, "/server/generation/kv_slots_in_use_peak"), 4);
  std::ifstream plot(svg);
  const std::string text((std::istreambuf_iterator<char>(plot)), {});
  EXPECT_THAT(text, HasSubstr("Time to first token"));
  EXPECT_THAT(text, HasSubstr("Output tokens per second"));
}

TEST_F(GenerationE2eTest, SloVerdictsSetTheExitCode) {
  const std::string strict = Path("strict.yaml"), loose = Path("loose.yaml");
  std::ofstream(strict) << "ttft_ms: {p99: 0.5}\nrequest: {tpot_ms: 0.5}\n";
  std::ofstream(loose) << "ttft_ms: {p99: 60000}\ntpot_ms: {p99: 60000}\nmax_error_rate: 0\n"
                          "request: {ttft_ms: 60000, tpot_ms: 60000}\n";
  const std::string json = Path("slo.json");
  Result fail = Run("-c 2 -n 8 --prompt-tokens fixed:20 --output-tokens fixed:8 --slo " + strict + " --json " + json);
  EXPECT_EQ(fail.exit_code, 1) << fail.output;
  EXPECT_THAT(fail.output, HasSubstr("FAIL  p99 TTFT (ms)"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/generation/good"), 0);  // no request meets a 0.5 ms TPOT
  Result pass = Run("-c 2 -n 8 --prompt-tokens fixed:20 --output-tokens fixed:8 --slo " + loose + " --json " + json);
  EXPECT_EQ(pass.exit_code, 0) << pass.output;
  EXPECT_THAT(pass.output, HasSubstr("SLO PASS"));
  doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/generation/good"), 8);
  EXPECT_EQ(Number(doc, "/results/good"), 8);
}

TEST_F(GenerationE2eTest, OpenLoopSweepAndCompare) {
  const std::string open = Path("open.json"), sweep = Path("sweep.json");
  Result r = Run("-r 20 --burstiness 0.5 -d 2 --prompt-tokens lognormal:24,0.5 --output-tokens uniform:4-12 --json " +
                 open);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document doc = Json(open);
  EXPECT_EQ(std::string(doc["run"]["mode"].GetString()), "open");
  EXPECT_EQ(std::string(doc["run"]["arrival"].GetString()), "gamma");
  EXPECT_GT(Number(doc, "/results/ok"), 10);
  EXPECT_EQ(Number(doc, "/results/errors"), 0);
  EXPECT_EQ(Number(doc, "/results/generation/usage_mismatches"), 0);

  Result s = Run("--sweep concurrency --sweep-levels 1,4 -n 8 --prompt-tokens fixed:16 --output-tokens fixed:8 --json " +
                 sweep);
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_THAT(s.output, HasSubstr("out tok/s"));
  doc = Json(sweep);
  ASSERT_EQ(doc["sweep"]["steps"].Size(), 2u);
  // Four sequences share a decode step: more output tokens per second than one at a time.
  EXPECT_GT(Number(doc, "/sweep/steps/1/generation/output_tokens_per_s"),
            1.5 * Number(doc, "/sweep/steps/0/generation/output_tokens_per_s"));

  Result c = Shell(std::string(SLUICE_LOADTEST_BINARY) + " --compare " + open + " " + sweep);
  ASSERT_EQ(c.exit_code, 0) << c.output;
  EXPECT_THAT(c.output, HasSubstr("TTFT p99 (ms)"));
  EXPECT_THAT(c.output, HasSubstr("output tokens/s"));
}

TEST_F(GenerationE2eTest, ChatPromptsFromAFile) {
  const std::string prompts = Path("prompts.txt"), json = Path("chat.json");
  std::ofstream(prompts) << "Tell me about rivers.\nWhat is a delta?\\nAnswer briefly.\n";
  Result r = Run("-c 2 -n 6 --chat --prompts-file " + prompts + " --output-tokens fixed:5 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/ok"), 6);
  EXPECT_EQ(Number(doc, "/results/generation/output_tokens"), 30);
  EXPECT_GT(Number(doc, "/results/generation/prompt_tokens"), 6 * 4);  // the chat template adds tokens
}

TEST_F(GenerationE2eTest, UnknownModelIsAServerError) {
  Result r = Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api openai -m no_such_model -u " +
                   server_->http_address() + " -c 1 -n 1");
  EXPECT_EQ(r.exit_code, 3) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no_such_model"));
}

// Without --model-repository (the README's second example): the vocabulary, the largest prompt bucket and the context
// come from the server's GET /v1/models. Before, ids were drawn up to 8192 for this 2000-token model, prompts up to
// 200 passed its 128-token bucket and 200 + 100 its 256 context: every request was refused, and the run exited 0.
TEST_F(GenerationE2eTest, WithoutTheRepositoryTheServersLimitsShapeTheRequests) {
  const std::string json = Path("no_repo.json");
  const Result r = Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api openai -m " + kModel + " -u " +
                         server_->http_address() + " --prompt-tokens uniform:16-200 --output-tokens fixed:200 -c 2 -n 10"
                         " --json " + json);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("synthetic ids in [1, 2000)"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/ok"), 10) << r.output;
  EXPECT_EQ(Number(doc, "/results/errors"), 0) << r.output;
  // Ids past the vocabulary (--vocab over the server's) are refused: nothing succeeds, exit 3, the server's message
  // is in the report for the code.
  const Result bad = Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api openai -m " + kModel + " -u " +
                           server_->http_address() + " --vocab 100000 --prompt-tokens fixed:100 --output-tokens fixed:4"
                           " -c 2 -n 4");
  EXPECT_EQ(bad.exit_code, 3) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--vocab 100000 is more than the server's vocab_size 2000"));
  EXPECT_THAT(bad.output, HasSubstr("  first INVALID_ARGUMENT: "));
  EXPECT_THAT(bad.output, HasSubstr("no request succeeded (4 errors); first INVALID_ARGUMENT: "));
  EXPECT_TRUE(ServerIdle());
}

TEST_F(GenerationE2eTest, TritonStreamClosedLoopCountsTokensAndMatchesTheServer) {
  const double before = ServerRequests();
  const double prompt_before = ServerSeries("sluice_generation_prompt_tokens_total");
  const double output_before = ServerSeries("sluice_generation_output_tokens_total");
  const std::string json = Path("triton.json"), svg = Path("triton.svg");
  const std::string load = "-c 4 -n 40 --seed 11 --prompt-tokens uniform:8-40 --output-tokens fixed:16 --json ";
  Result r = RunTriton(load + json + " --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("generation (triton-stream"));
  EXPECT_THAT(r.output, HasSubstr("sized by the model's tokenizer"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(std::string(doc["config"]["api"].GetString()), "triton-stream");
  EXPECT_EQ(Number(doc, "/results/requests"), 40);
  EXPECT_EQ(Number(doc, "/results/ok"), 40);
  EXPECT_EQ(Number(doc, "/results/errors"), 0);
  EXPECT_EQ(Number(doc, "/results/generation/requests"), 40);
  EXPECT_EQ(Number(doc, "/results/generation/usage_mismatches"), 0);
  EXPECT_EQ(Number(doc, "/results/generation/output_tokens"), 40 * 16);
  const double prompt_tokens = Number(doc, "/results/generation/prompt_tokens");
  EXPECT_GE(prompt_tokens, 40 * 8);
  EXPECT_LE(prompt_tokens, 40 * 40);
  EXPECT_EQ(Number(doc, "/results/generation/ttft_ms/count"), 40);
  EXPECT_EQ(Number(doc, "/results/generation/tpot_ms/count"), 40);
  EXPECT_GT(Number(doc, "/results/generation/itl_ms/count"), 0);
  EXPECT_LE(Number(doc, "/results/generation/itl_ms/count"), 40 * 15);  // at most one gap per token after the first
  EXPECT_GE(Number(doc, "/results/generation/tpot_ms/p50"), 4.5);
  EXPECT_GE(Number(doc, "/results/generation/ttft_ms/min"), 4.5);
  EXPECT_GT(Number(doc, "/results/generation/output_tokens_per_s"), 0);
  // The server counted exactly these requests and tokens: the client's own prompt counts (ModelStreamInfer reports
  // none) are the server's, and ignore_eos made every output exactly max_tokens long.
  EXPECT_EQ(ServerRequests() - before, 40);
  EXPECT_EQ(ServerSeries("sluice_generation_prompt_tokens_total") - prompt_before, prompt_tokens);
  EXPECT_EQ(ServerSeries("sluice_generation_output_tokens_total") - output_before, 40 * 16);
  EXPECT_EQ(Number(doc, "/server/generation/requests"), 40);
  EXPECT_EQ(Number(doc, "/server/generation/prompt_tokens"), prompt_tokens);
  EXPECT_LE(Number(doc, "/server/generation/kv_slots_in_use_peak"), 4);
  std::ifstream plot(svg);
  const std::string text((std::istreambuf_iterator<char>(plot)), {});
  EXPECT_THAT(text, HasSubstr("Time to first token"));

  // The same seed over the OpenAI API sends the same prompt lengths (as token ids, counted by the server's usage):
  // the text prompts were sized to exactly the drawn lengths, BOS included.
  const std::string openai = Path("triton_vs_openai.json");
  Result o = Run(load + openai);
  ASSERT_EQ(o.exit_code, 0) << o.output;
  EXPECT_EQ(Number(Json(openai), "/results/generation/prompt_tokens"), prompt_tokens);
}

TEST_F(GenerationE2eTest, TritonStreamOpenLoopAndSlo) {
  const std::string strict = Path("triton_strict.yaml"), open = Path("triton_open.json");
  std::ofstream(strict) << "ttft_ms: {p99: 0.5}\nrequest: {tpot_ms: 0.5}\n";
  Result r = RunTriton("-r 20 --burstiness 0.5 -d 2 --prompt-tokens lognormal:24,0.5 --output-tokens uniform:4-12 "
                       "--request-seeds --temperature 0.7 --json " + open);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document doc = Json(open);
  EXPECT_EQ(std::string(doc["run"]["mode"].GetString()), "open");
  EXPECT_GT(Number(doc, "/results/ok"), 10);
  EXPECT_EQ(Number(doc, "/results/errors"), 0);
  EXPECT_EQ(Number(doc, "/results/generation/usage_mismatches"), 0);
  Result fail = RunTriton("-c 2 -n 6 --prompt-tokens fixed:20 --output-tokens fixed:8 --slo " + strict);
  EXPECT_EQ(fail.exit_code, 1) << fail.output;
  EXPECT_THAT(fail.output, HasSubstr("FAIL  p99 TTFT (ms)"));
}

TEST_F(GenerationE2eTest, TritonStreamRefusalsAreCountedByCode) {
  // Prompts of 100 tokens + 200 to generate exceed the model's context of 256: every request is refused on its
  // stream (an error response, the stream goes on and ends OK), counted as INVALID_ARGUMENT, its message shown.
  const std::string json = Path("triton_refused.json");
  Result r = RunTriton("-c 2 -n 6 --prompt-tokens fixed:100 --output-tokens fixed:200 --json " + json);
  EXPECT_EQ(r.exit_code, 3) << r.output;  // no request succeeded: the run measured nothing (issue 23)
  EXPECT_THAT(r.output, HasSubstr("first INVALID_ARGUMENT error: the prompt (100 tokens) plus max_tokens (200)"));
  // The report itself names the server's message, and so does the final error line.
  EXPECT_THAT(r.output, HasSubstr("  first INVALID_ARGUMENT: the prompt (100 tokens) plus max_tokens (200)"));
  EXPECT_THAT(r.output, HasSubstr("no request succeeded (6 errors); first INVALID_ARGUMENT: the prompt"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/ok"), 0);
  EXPECT_EQ(Number(doc, "/results/errors_by_code/INVALID_ARGUMENT"), 6);
  EXPECT_TRUE(ServerIdle());
}

TEST_F(GenerationE2eTest, TritonStreamDeadlinesAndTheCapCancelStreams) {
  // 200 tokens take >= 1 s on the sim (5 ms a step): a 300 ms deadline ends every stream as DEADLINE_EXCEEDED.
  const std::string late = Path("triton_late.json");
  Result r = RunTriton("-c 2 -n 4 --timeout-ms 300 --prompt-tokens fixed:16 --output-tokens fixed:200 --json " +
                       late);
  EXPECT_EQ(r.exit_code, 3) << r.output;  // every stream ran out of time: nothing succeeded
  EXPECT_THAT(r.output, HasSubstr("n/a"));  // latency figures without a sample, not 0
  EXPECT_EQ(Number(Json(late), "/results/errors_by_code/DEADLINE_EXCEEDED"), 4) << r.output;
  EXPECT_TRUE(ServerIdle());  // the server saw the streams go and freed their slots
  // The run's cap cancels the streams in flight (CANCELLED), and the server frees their slots too.
  const std::string capped = Path("triton_capped.json");
  r = RunTriton("-c 4 -n 100 --max-duration 1.5 --prompt-tokens fixed:16 --output-tokens fixed:200 --json " +
                capped);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("CAPPED"));
  rapidjson::Document doc = Json(capped);
  EXPECT_TRUE(doc["run"]["capped"].GetBool());
  EXPECT_GE(Number(doc, "/results/errors_by_code/CANCELLED"), 1) << r.output;
  EXPECT_TRUE(ServerIdle());
}

TEST_F(GenerationE2eTest, TritonStreamRefusesWhatItCannotLoad) {
  Result unknown = RunTriton("-c 1 -n 1", "no_such_model");
  EXPECT_EQ(unknown.exit_code, 3) << unknown.output;
  EXPECT_THAT(unknown.output, HasSubstr("no_such_model"));
  EXPECT_THAT(unknown.output, HasSubstr("NOT_FOUND"));
  Result tensor = RunTriton("-c 1 -n 1", "embed_sim");
  EXPECT_EQ(tensor.exit_code, 3) << tensor.output;
  EXPECT_THAT(tensor.output, HasSubstr("embed_sim is not a text-generation model"));
  EXPECT_THAT(tensor.output, HasSubstr("input_ids (INT64)"));
  Result http = RunTriton("-c 1 -n 1 --protocol http");
  EXPECT_EQ(http.exit_code, 2) << http.output;
  EXPECT_THAT(http.output, HasSubstr("--protocol http does not apply"));
  // Text prompts of a drawn token count need the model's tokenizer.
  Result untokenized = Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api triton-stream -m " + kModel +
                             " -u " + server_->grpc_address() + " -c 1 -n 1");
  EXPECT_EQ(untokenized.exit_code, 2) << untokenized.output;
  EXPECT_THAT(untokenized.output, HasSubstr("--tokenizer"));
  // ... or a prompt file (then the tokenizer, when at hand, counts them).
  const std::string prompts = Path("triton_prompts.txt"), json = Path("triton_file.json");
  std::ofstream(prompts) << "Tell me about rivers.\nWhat is a delta?\n";
  Result file = RunTriton("-c 2 -n 6 --prompts-file " + prompts + " --output-tokens fixed:5 --json " + json);
  ASSERT_EQ(file.exit_code, 0) << file.output;
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/ok"), 6);
  EXPECT_EQ(Number(doc, "/results/generation/output_tokens"), 30);
  EXPECT_EQ(Number(doc, "/results/generation/prompt_tokens"), Number(doc, "/server/generation/prompt_tokens"));
}

}  // namespace
}  // namespace sluice
