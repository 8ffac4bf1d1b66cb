// Issue 30, a hung generation step against the real sluice-server: two sim generation models (llama_tiny's
// tokenizer), each with two instances of which instance 0 hangs (for an hour) from its third backend call on —
// the second decode step of the first sequence it runs (sim faults hang_after_batches: 2, replica: 0). The
// engine's watchdog answers that sequence at generation.execution_timeout_ms with UNAVAILABLE naming model, graph
// and instance — OpenAI HTTP: 503 in OpenAI's error shape for a whole answer, an error event and [DONE] for a
// stream already started —, the other instance serves on (during the hang and after it), the hung instance
// leaves rotation (metrics), and the server still drains to exit 0 on SIGTERM with the hung threads left inside
// their backends.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "httplib.h"
#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kTimeoutMs = 400;

// max_num_seqs 1: each instance runs one sequence at a time, so two requests sent together go one to each
// instance (the busy one cannot admit the second). 20 ms per call: a whole 8-token answer takes ~160 ms, well
// inside the timeout.
std::string HangingModelConfig(const std::string& name) {
  return "name: " + name + "\nkind: generation\ngeneration:\n  tokenizer: tokenizer.model\n  vocab_size: 2000\n"
         "  context_length: 256\n  kv_cache: {slots: 2, layers: 1, kv_heads: 1, head_dim: 8}\n"
         "  prefill_lengths: [16, 64, 128]\n  decode_batch_sizes: [1, 2]\n  kv_lengths: [128, 256]\n"
         "  bos_token_id: 1\n  eos_token_id: 2\n  max_num_seqs: 1\n  prefill_token_budget: 128\n"
         "  max_queue_size: 16\n  default_max_tokens: 8\n  execution_timeout_ms: " + std::to_string(kTimeoutMs) +
         "\ninstances: [{count: 2, device: sim}]\n"
         "sim: {base_ms: 20, per_sample_us: 0, faults: {hang_after_batches: 2, replica: 0}}\n";
}

std::filesystem::path WriteRepository() {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("sluice_generation_hang_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  for (const std::string name : {"hang_stream", "hang_whole"}) {
    std::filesystem::create_directories(root / name);
    std::filesystem::copy_file(std::filesystem::path(SLUICE_MODELS_DIR) / "llama_tiny" / "tokenizer.model",
                               root / name / "tokenizer.model");
    std::ofstream(root / name / "config.yaml") << HangingModelConfig(name);
  }
  return root;
}

struct HttpAnswer {
  int status = 0;
  std::string body;
  double seconds = 0;  // from sending to the whole answer
};

HttpAnswer Complete(int port, const std::string& model, bool stream) {
  const std::string body = "{\"model\":\"" + model + "\",\"prompt\":\"Hello there\",\"max_tokens\":8,"
                           "\"temperature\":0,\"ignore_eos\":true,\"stream\":" + (stream ? "true" : "false") + "}";
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(30, 0);
  const auto start = std::chrono::steady_clock::now();
  httplib::Result result = client.Post("/v1/completions", body, "application/json");
  HttpAnswer answer;
  answer.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!result) {
    answer.status = -1;
    answer.body = httplib::to_string(result.error());
    return answer;
  }
  answer.status = result->status;
  answer.body = result->body;
  return answer;
}

// Two requests at once: one runs on each instance.
std::vector<HttpAnswer> TwoAtOnce(int port, const std::string& model, bool stream) {
  std::vector<HttpAnswer> answers(2);
  std::vector<std::thread> clients;
  for (int i = 0; i < 2; ++i) clients.emplace_back([&, i] { answers[i] = Complete(port, model, stream); });
  for (std::thread& t : clients) t.join();
  return answers;
}

// What the timed-out sequence's error says.
void ExpectHungStepMessage(const std::string& body, const std::string& model) {
  EXPECT_THAT(body, HasSubstr("model " + model + ", decode (batch 1, KV length 128), instance 0 (" + model +
                              "#0 on sim"));
  EXPECT_THAT(body, HasSubstr("did not finish within execution_timeout_ms " + std::to_string(kTimeoutMs)));
  EXPECT_THAT(body, HasSubstr("\"type\":\"server_error\""));
}

bool Succeeded(const HttpAnswer& answer, bool stream) {
  if (answer.status != 200 || answer.body.find("\"error\"") != std::string::npos) return false;
  if (!stream) return answer.body.find("\"finish_reason\":\"length\"") != std::string::npos;
  return answer.body.find("\"finish_reason\":\"length\"") != std::string::npos &&
         answer.body.find("data: [DONE]") != std::string::npos;
}

class GenerationHangProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = new std::filesystem::path(WriteRepository());
    testing::ServerProcess::Options options;
    options.source_repository = repository_->string();
    server_ = new testing::ServerProcess(options);
  }
  static void TearDownTestSuite() {
    delete server_;
    std::filesystem::remove_all(*repository_);
    delete repository_;
  }
  void SetUp() override { ASSERT_TRUE(server_->ready()) << server_->Log(); }

  std::string Metrics() {
    httplib::Client http("127.0.0.1", server_->http_port());
    auto result = http.Get("/metrics");
    return result ? result->body : "";
  }

  // The three requests after the hang: all on the instance left, all whole.
  void ExpectTheOtherInstanceServes(const std::string& model, bool stream) {
    for (int i = 0; i < 3; ++i) {
      const HttpAnswer later = Complete(server_->http_port(), model, stream);
      EXPECT_TRUE(Succeeded(later, stream)) << later.status << " " << later.body;
    }
    const std::string metrics = Metrics();
    EXPECT_THAT(metrics, HasSubstr("sluice_instances_in_rotation{model=\"" + model + "\"} 1"));
    EXPECT_THAT(metrics, HasSubstr("sluice_execution_timeouts_total{instance=\"0\",model=\"" + model + "\"} 1"));
    EXPECT_THAT(metrics, Not(HasSubstr("sluice_execution_timeouts_total{instance=\"1\",model=\"" + model + "\"}")));
  }

  static inline testing::ServerProcess* server_ = nullptr;
  static inline std::filesystem::path* repository_ = nullptr;
};

TEST_F(GenerationHangProcessTest, AHungDecodeEndsItsStreamWithAnErrorEventAndTheOtherInstanceServesOn) {
  EXPECT_THAT(Metrics(), HasSubstr("sluice_instances_in_rotation{model=\"hang_stream\"} 2"));
  std::vector<HttpAnswer> answers = TwoAtOnce(server_->http_port(), "hang_stream", true);
  const int failed = Succeeded(answers[0], true) ? 1 : 0;
  const HttpAnswer& ok = answers[1 - failed];
  const HttpAnswer& hung = answers[failed];
  EXPECT_TRUE(Succeeded(ok, true)) << ok.status << " " << ok.body;
  // The stream had started (its first token came from the prefill): 200, then the error as an event, then [DONE].
  EXPECT_EQ(hung.status, 200) << hung.body;
  const size_t error_event = hung.body.find("data: {\"error\":");
  ASSERT_NE(error_event, std::string::npos) << hung.body;
  EXPECT_NE(hung.body.rfind("\"text\":", error_event), std::string::npos) << "no text streamed before the error";
  EXPECT_THAT(hung.body, Not(HasSubstr("\"finish_reason\":\"")));  // text chunks carry null; no finish chunk
  EXPECT_EQ(hung.body.substr(hung.body.find("\n\n", error_event)), "\n\ndata: [DONE]\n\n");
  ExpectHungStepMessage(hung.body, "hang_stream");
  EXPECT_GE(hung.seconds, kTimeoutMs / 1000.0 - 0.01);  // answered at the timeout, not before
  EXPECT_LT(hung.seconds, 15);
  ExpectTheOtherInstanceServes("hang_stream", true);
}

TEST_F(GenerationHangProcessTest, AHungDecodeOfAWholeAnswerIs503AndTheOtherInstanceServesOn) {
  std::vector<HttpAnswer> answers = TwoAtOnce(server_->http_port(), "hang_whole", false);
  const int failed = Succeeded(answers[0], false) ? 1 : 0;
  const HttpAnswer& ok = answers[1 - failed];
  const HttpAnswer& hung = answers[failed];
  EXPECT_TRUE(Succeeded(ok, false)) << ok.status << " " << ok.body;
  EXPECT_EQ(hung.status, 503) << hung.body;
  EXPECT_THAT(hung.body, HasSubstr("{\"error\":"));
  ExpectHungStepMessage(hung.body, "hang_whole");
  EXPECT_GE(hung.seconds, kTimeoutMs / 1000.0 - 0.01);
  ExpectTheOtherInstanceServes("hang_whole", false);
  EXPECT_THAT(Metrics(), HasSubstr("sluice_generation_requests_total{model=\"hang_whole\",outcome=\"rejected\"} 1"));
}

// Last (gtest runs a file's tests in order): SIGTERM with two instances still inside their backends.
TEST_F(GenerationHangProcessTest, TheServerStillDrainsAndExitsZeroWithHungInstances) {
  server_->Signal(SIGTERM);
  EXPECT_EQ(server_->WaitExit(std::chrono::seconds(20)), 0) << server_->Log();
}

}  // namespace
}  // namespace sluice
