// GenerationModel, in process: the one generation request path (prompt building, limits, stop strings,
// detokenized deltas, client gone, draining) over the real ContinuousBatcher and the sim generation device,
// whose tokens are known in advance (SimNextToken), with the example model's real SentencePiece tokenizer.
// Every outcome, refusals included, reaches the sink exactly once (ServedModel::Infer's contract).
#include "server/llm/generation_model.h"

#include <memory>
#include <string>
#include <vector>

#include <thread>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backend/sim_generation_backend.h"
#include "backend/base/sync.h"
#include "gtest/gtest.h"
#include "server/core/served_model.h"
#include "server/metrics/server_metrics.h"

namespace sluice {
namespace {

constexpr int kVocab = 2000;

ModelConfig SimGenerationConfig() {
  ModelConfig config;
  config.name = "tiny_sim";
  config.kind = ModelKind::kGeneration;
  GenerationOptions g;
  g.tokenizer_path = std::string(SLUICE_MODELS_DIR) + "/llama_tiny/tokenizer.model";
  g.vocab_size = kVocab;
  g.context_length = 256;
  g.kv_cache = {4, 1, 1, 8};
  g.prefill_lengths = {16, 64, 128};
  g.decode_batch_sizes = {1, 2, 4};
  g.kv_lengths = {128, 256};
  g.bos_token_id = 1;
  g.eos_token_id = 2;
  g.max_num_seqs = 4;
  g.prefill_token_budget = 128;
  g.max_queue_size = 8;
  g.default_max_tokens = 12;
  config.generation = g;
  config.sim = SimCostModel{};
  InstanceGroup group;
  group.device = DeviceKind::kSim;
  config.instances = {group};
  return config;
}

// Records what a call delivered; Wait() returns once OnDone ran. (sluice::Mutex, not absl's: TSan sees it.)
class RecordingSink : public GenerationSink {
 public:
  explicit RecordingSink(int accept_deltas = 1 << 30) : accept_deltas_(accept_deltas) {}
  bool OnDelta(const GenerationDelta& delta) override {
    MutexLock lock(&mu_);
    text += delta.text;
    ids.insert(ids.end(), delta.token_ids.begin(), delta.token_ids.end());
    ++deltas;
    return deltas <= accept_deltas_;
  }
  void OnDone(const GenerationSummary& s) override {
    MutexLock lock(&mu_);
    summary = s;
    ++done_calls;
    done_thread = std::this_thread::get_id();
    done_cv_.SignalAll();
  }
  void Wait() {
    MutexLock lock(&mu_);
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (done_calls == 0 && absl::Now() < deadline) done_cv_.WaitUntil(&mu_, deadline);
    ASSERT_GT(done_calls, 0) << "OnDone was not called within 20 s";
  }

  // Read after Wait() (OnDone is the last call).
  std::string text;
  std::vector<int32_t> ids;
  int deltas = 0;
  int done_calls = 0;
  GenerationSummary summary;
  std::thread::id done_thread;

 private:
  Mutex mu_;
  CondVar done_cv_;
  const int accept_deltas_;
};

class GenerationModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_ = SimGenerationConfig();
    Build();
  }

  // The model over config_ (a test may change config_, reset model_ and backend_, and build again).
  void Build() {
    InstanceOptions instance{&config_, config_.instances.front(), 0, 1};
    auto backend = CreateSimGenerationBackend(instance);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    state_.SetReady();
    metrics_ = std::make_unique<ServerMetrics>(absl::Now(), std::nullopt);
    GenerationModelOptions options;
    options.config = &config_;
    options.instances = {backend_.get()};
    options.state = &state_;
    options.metrics = metrics_.get();
    auto model = GenerationModel::Create(options);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  // What the sim device generates greedily after `prompt` (ids), `count` tokens.
  static std::vector<int32_t> Expected(std::vector<int32_t> prompt, int count) {
    std::vector<int32_t> out;
    for (int i = 0; i < count; ++i) {
      const int32_t next = SimNextToken(prompt, kVocab);
      out.push_back(next);
      prompt.push_back(next);
    }
    return out;
  }

  std::vector<int32_t> WithBos(const std::string& text) const {
    std::vector<int32_t> ids = {1};
    const std::vector<int32_t> encoded = model_->tokenizer().Encode(text);
    ids.insert(ids.end(), encoded.begin(), encoded.end());
    return ids;
  }

  ModelConfig config_;
  std::unique_ptr<GenerationBackend> backend_;
  ServingState state_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<GenerationModel> model_;
};

TEST_F(GenerationModelTest, CompletionStreamsTheTokensTheDeviceProduces) {
  GenerationCall call;
  call.prompt = "This program is free software";
  call.max_tokens = 20;
  call.ignore_eos = true;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(model_->Generate(call, sink).accepted());
  sink->Wait();
  const std::vector<int32_t> expected = Expected(WithBos(*call.prompt), 20);
  EXPECT_EQ(sink->ids, expected);
  EXPECT_EQ(sink->text, model_->tokenizer().Decode(expected));
  EXPECT_TRUE(sink->summary.status.ok()) << sink->summary.status;
  EXPECT_EQ(sink->summary.finish, FinishReason::kLength);
  EXPECT_EQ(sink->summary.prompt_tokens, static_cast<int>(WithBos(*call.prompt).size()));
  EXPECT_EQ(sink->summary.completion_tokens, 20);
  EXPECT_EQ(sink->done_calls, 1);
}

TEST_F(GenerationModelTest, ChatMessagesGoThroughTheTemplate) {
  GenerationCall call;
  call.messages = std::vector<ChatMessage>{{"system", "Be brief."}, {"user", "Hello"}};
  call.max_tokens = 3;
  call.ignore_eos = true;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(model_->Generate(call, sink).accepted());
  sink->Wait();
  const ChatTemplate& chat = config_.generation->chat_template;
  const std::string rendered =
      chat.system + "Be brief." + chat.separator + chat.user + "Hello" + chat.separator + chat.assistant;
  EXPECT_EQ(sink->ids, Expected(WithBos(rendered), 3));
  EXPECT_EQ(sink->summary.prompt_tokens, static_cast<int>(WithBos(rendered).size()));
}

TEST_F(GenerationModelTest, DefaultMaxTokensComesFromTheConfig) {
  GenerationCall call;
  call.prompt_ids = std::vector<int32_t>{1, 50, 60};
  call.ignore_eos = true;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(model_->Generate(call, sink).accepted());
  sink->Wait();
  EXPECT_EQ(sink->summary.completion_tokens, config_.generation->default_max_tokens);
  EXPECT_EQ(sink->ids, Expected({1, 50, 60}, config_.generation->default_max_tokens));
}

TEST_F(GenerationModelTest, StopStringCutsTheOutputAndFinishesEarly) {
  // Find the full text first, then stop on a piece of its middle.
  GenerationCall call;
  call.prompt_ids = std::vector<int32_t>{1, 300, 301, 302};
  call.max_tokens = 30;
  call.ignore_eos = true;
  auto full = std::make_shared<RecordingSink>();
  ASSERT_TRUE(model_->Generate(call, full).accepted());
  full->Wait();
  ASSERT_GE(full->text.size(), 12u) << "the sim's tokens decode to too little text to pick a stop string";
  const size_t cut = full->text.size() / 2;
  const std::string stop = full->text.substr(cut, 3);
  const size_t first = full->text.find(stop);

  call.stop = {stop};
  auto stopped = std::make_shared<RecordingSink>();
  ASSERT_TRUE(model_->Generate(call, stopped).accepted());
  stopped->Wait();
  EXPECT_EQ(stopped->text, full->text.substr(0, first));
  EXPECT_EQ(stopped->summary.finish, FinishReason::kStop);
  EXPECT_TRUE(stopped->summary.status.ok());
  EXPECT_LT(stopped->summary.completion_tokens, 30);
}

TEST_F(GenerationModelTest, EchoPutsThePromptFirst) {
  GenerationCall call;
  call.prompt = "Copyright";
  call.echo = true;
  call.max_tokens = 4;
  call.ignore_eos = true;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(model_->Generate(call, sink).accepted());
  sink->Wait();
  EXPECT_EQ(sink->text, "Copyright" + model_->tokenizer().Decode(Expected(WithBos("Copyright"), 4)));
}

TEST_F(GenerationModelTest, AGoneClientCancelsItsSequenceAndFreesTheSlot) {
  GenerationCall call;
  call.prompt_ids = std::vector<int32_t>{1, 7};
  call.max_tokens = 100;
  call.ignore_eos = true;
  auto sink = std::make_shared<RecordingSink>(/*accept_deltas=*/2);
  ASSERT_TRUE(model_->Generate(call, sink).accepted());
  sink->Wait();
  EXPECT_EQ(sink->summary.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(sink->summary.finish, FinishReason::kCancelled);
  EXPECT_EQ(sink->deltas, 3);  // the third delta was refused; none after it
  EXPECT_EQ(model_->engine().Running(), 0);
}

TEST_F(GenerationModelTest, RefusalsNameWhatIsWrong) {
  struct Case {
    std::string what;
    GenerationCall call;
    std::string message;
    std::string field = "";  // RequestField: OpenAI's "param"
  };
  std::vector<Case> cases;
  cases.push_back({"no input", GenerationCall{}, "no prompt", "prompt"});
  {
    GenerationCall c;
    c.prompt = "a";
    c.prompt_ids = std::vector<int32_t>{1};
    cases.push_back({"two inputs", c, "exactly one", "prompt"});
  }
  {
    GenerationCall c;
    c.messages = std::vector<ChatMessage>{{"wizard", "hi"}};
    cases.push_back({"unknown role", c, "'wizard'", "messages"});
  }
  {
    GenerationCall c;
    c.prompt_ids = std::vector<int32_t>(129, 5);
    cases.push_back({"prompt over the largest bucket", c, "at most 128", "prompt"});
  }
  {
    GenerationCall c;
    c.prompt_ids = std::vector<int32_t>(100, 5);
    c.max_tokens = 157;
    cases.push_back({"prompt + max_tokens over the context", c, "context of 256", "max_tokens"});
  }
  {
    GenerationCall c;
    c.prompt = "a";
    c.max_tokens = 0;
    cases.push_back({"max_tokens 0", c, "at least 1", "max_tokens"});
  }
  {
    GenerationCall c;
    c.prompt = "a";
    c.max_tokens = int64_t{1000000000000};
    cases.push_back({"max_tokens 10^12, reported as given", c, "max_tokens (1000000000000)", "max_tokens"});
  }
  {
    GenerationCall c;
    c.prompt = "a";
    c.sampling.top_p = 0;
    cases.push_back({"top_p 0", c, "top_p is 0", "top_p"});
  }
  {
    GenerationCall c;
    c.prompt = "a";
    c.stop = {"1", "2", "3", "4", "5"};
    cases.push_back({"five stop strings", c, "at most 4", "stop"});
  }
  {
    GenerationCall c;
    c.prompt_ids = std::vector<int32_t>{1, kVocab};
    cases.push_back({"token id out of range", c, std::to_string(kVocab), "prompt"});
  }
  for (const Case& c : cases) {
    auto sink = std::make_shared<RecordingSink>();
    model_->Generate(c.call, sink);
    sink->Wait();
    const absl::Status& status = sink->summary.status;
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.what << ": " << status;
    EXPECT_NE(status.message().find(c.message), std::string::npos) << c.what << ": " << status;
    EXPECT_EQ(RequestField(status), c.field) << c.what;
    EXPECT_EQ(sink->done_calls, 1) << c.what;
    EXPECT_TRUE(sink->ids.empty()) << c.what;
  }
  const std::string metrics = metrics_->Render(absl::Now());
  EXPECT_NE(metrics.find("sluice_generation_requests_total{model=\"tiny_sim\",outcome=\"invalid\"} " +
                         std::to_string(cases.size())),
            std::string::npos);
}

TEST_F(GenerationModelTest, DrainingRefusesNewCallsAsUnavailable) {
  state_.BeginDrain();
  GenerationCall call;
  call.prompt = "a";
  auto sink = std::make_shared<RecordingSink>();
  GenerationHandle handle = model_->Generate(call, sink);
  EXPECT_FALSE(handle.accepted());
  EXPECT_EQ(sink->done_calls, 1);  // refused on the caller's thread, through the sink
  EXPECT_EQ(sink->summary.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(model_->ready());
}

// Issue 23: a malformed request (the front end's decode error) goes through the same path: the sink answers it
// once and sluice_generation_requests_total counts it.
TEST_F(GenerationModelTest, ADecodeErrorIsAnsweredThroughTheSinkAndCounted) {
  auto sink = std::make_shared<RecordingSink>();
  GenerationHandle handle =
      model_->Generate(WithRequestField(absl::InvalidArgumentError("'temperature' must be a number"), "temperature"),
                       sink);
  EXPECT_FALSE(handle.accepted());
  ASSERT_EQ(sink->done_calls, 1);
  EXPECT_EQ(sink->summary.status.message(), "'temperature' must be a number");
  EXPECT_EQ(RequestField(sink->summary.status), "temperature");
  EXPECT_NE(metrics_->Render(absl::Now())
                .find("sluice_generation_requests_total{model=\"tiny_sim\",outcome=\"invalid\"} 1"),
            std::string::npos);
}

// Issue 23: a prompt whose bytes could not fit the largest prompt bucket is refused from its size on the
// caller's thread (no tokenizing), naming the byte limit and how it follows from the bucket.
TEST_F(GenerationModelTest, APromptTooLongInBytesIsRefusedBeforeTokenizing) {
  const int piece = model_->tokenizer().max_piece_bytes();
  ASSERT_GE(piece, 6) << "byte-fallback pieces (<0xAB>) are 6 bytes";
  EXPECT_EQ(model_->max_prompt_bytes(), int64_t{piece} * 128);
  GenerationCall call;
  call.prompt = std::string(model_->max_prompt_bytes() + 1, 'x');
  auto sink = std::make_shared<RecordingSink>();
  GenerationHandle handle = model_->Generate(call, sink);
  EXPECT_FALSE(handle.accepted());
  ASSERT_EQ(sink->done_calls, 1);  // answered before Generate returned: no prep job
  EXPECT_EQ(sink->done_thread, std::this_thread::get_id());
  const absl::Status& status = sink->summary.status;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find(absl::StrCat("at most ", model_->max_prompt_bytes(), " bytes")), std::string::npos)
      << status;
  EXPECT_EQ(RequestField(status), "prompt");

  // Chat: the messages' bytes (and the template's) count the same way.
  GenerationCall chat;
  chat.messages = std::vector<ChatMessage>{{"user", std::string(model_->max_prompt_bytes(), 'y')}};
  auto chat_sink = std::make_shared<RecordingSink>();
  model_->Generate(chat, chat_sink);
  ASSERT_EQ(chat_sink->done_calls, 1);
  EXPECT_NE(chat_sink->summary.status.message().find("bytes"), std::string::npos) << chat_sink->summary.status;
  EXPECT_EQ(RequestField(chat_sink->summary.status), "messages");
}

// The byte bound never refuses what it should not: a text exactly at it goes on to the tokenizer (on a prep
// thread) and is refused there only for its tokens.
TEST_F(GenerationModelTest, APromptAtTheByteBoundIsTokenizedOffTheCallersThread) {
  GenerationCall call;
  call.prompt = std::string(model_->max_prompt_bytes(), 'x');
  auto sink = std::make_shared<RecordingSink>();
  EXPECT_TRUE(model_->Generate(call, sink).accepted());
  sink->Wait();
  EXPECT_NE(sink->done_thread, std::this_thread::get_id());
  EXPECT_EQ(sink->summary.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sink->summary.status.message().find("tokens; model tiny_sim takes prompts of at most 128 tokens"),
            std::string::npos)
      << sink->summary.status;
}

TEST_F(GenerationModelTest, ACallCancelledAtOnceIsAnsweredOnceAsCancelled) {
  // 20 ms per sim step: a 200-token generation takes 4 s, so the Cancel() below always comes first.
  model_.reset();
  backend_.reset();
  config_.sim = SimCostModel{20.0};
  Build();
  for (int i = 0; i < 10; ++i) {
    GenerationCall call;
    call.prompt = "Cancel me";
    call.max_tokens = 200;
    call.ignore_eos = true;
    auto sink = std::make_shared<RecordingSink>();
    GenerationHandle handle = model_->Generate(call, sink);
    ASSERT_TRUE(handle.accepted());
    handle.Cancel();  // while it is prepared, waiting or running: whichever, one CANCELLED answer
    sink->Wait();
    EXPECT_EQ(sink->done_calls, 1);
    EXPECT_EQ(sink->summary.status.code(), absl::StatusCode::kCancelled) << sink->summary.status;
    handle.Cancel();  // again, after the end: no effect
  }
  model_->Stop();
  EXPECT_EQ(model_->engine().Running(), 0);
}

TEST_F(GenerationModelTest, MetricsCountTokensAndLatencies) {
  GenerationCall call;
  call.prompt_ids = std::vector<int32_t>{1, 9, 10};
  call.max_tokens = 5;
  call.ignore_eos = true;
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(model_->Generate(call, sink).accepted());
  sink->Wait();
  const std::string metrics = metrics_->Render(absl::Now());
  EXPECT_NE(metrics.find("sluice_generation_prompt_tokens_total{model=\"tiny_sim\"} 3"), std::string::npos);
  EXPECT_NE(metrics.find("sluice_generation_output_tokens_total{model=\"tiny_sim\"} 5"), std::string::npos);
  EXPECT_NE(metrics.find("sluice_generation_time_to_first_token_seconds_count{model=\"tiny_sim\",prefix_cache=\"miss\"} 1"),
            std::string::npos);
  EXPECT_NE(metrics.find("sluice_generation_inter_token_latency_seconds_count{model=\"tiny_sim\"} 4"),
            std::string::npos);
  EXPECT_NE(metrics.find("sluice_generation_kv_slots{model=\"tiny_sim\"} 4"), std::string::npos);
}

// A Hugging Face model directory: tokenizer.json (word level: [UNK] 0, hello 1, world 2; special <|user|> 3,
// <|end|> 4, <|assistant|> 5, <s> 6: added tokens take the ids after the model's, as HF assigns them) and
// tokenizer_config.json with a Jinja chat template beside it.
class HfGenerationModelTest : public GenerationModelTest {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / absl::StrCat("hf_generation_model_test_", getpid());
    std::filesystem::create_directories(dir_);
    std::string added;
    for (auto [id, text] : {std::pair{3, "<|user|>"}, {4, "<|end|>"}, {5, "<|assistant|>"}, {6, "<s>"}}) {
      absl::StrAppend(&added, added.empty() ? "" : ", ", "{\"id\": ", id, ", \"content\": \"", text,
                      "\", \"single_word\": false, \"lstrip\": false, \"rstrip\": false, \"normalized\": false, "
                      "\"special\": true}");
    }
    std::ofstream(dir_ / "tokenizer.json")
        << "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null, \"added_tokens\": [" << added
        << "], \"normalizer\": null, \"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"}, \"post_processor\": null,"
           " \"decoder\": null, \"model\": {\"type\": \"WordLevel\", \"vocab\": {\"[UNK]\": 0, \"hello\": 1, "
           "\"world\": 2}, \"unk_token\": \"[UNK]\"}}";
    std::ofstream(dir_ / "tokenizer_config.json") << R"({"bos_token": "<s>", "eos_token": "<|end|>",
      "chat_template": "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}<|{{ m.role }}|> {{ m.content }} <|end|> {% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"})";
    config_ = SimGenerationConfig();
    config_.generation->tokenizer_path = (dir_ / "tokenizer.json").string();
    config_.generation->bos_token_id = 6;
    Build();
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::shared_ptr<RecordingSink> Run(GenerationCall call) {
    call.max_tokens = 3;
    call.ignore_eos = true;
    auto sink = std::make_shared<RecordingSink>();
    model_->Generate(call, sink);
    sink->Wait();
    return sink;
  }
  std::filesystem::path dir_;
};

TEST_F(HfGenerationModelTest, ChatUsesTheCheckpointsJinjaTemplateWithItsSpecialTokens) {
  GenerationCall call;
  call.messages = std::vector<ChatMessage>{{"user", "hello world"}};
  auto sink = Run(call);
  ASSERT_TRUE(sink->summary.status.ok()) << sink->summary.status;
  // "<s><|user|> hello world <|end|> <|assistant|>": the template's BOS, no second one from the config.
  const std::vector<int32_t> prompt = {6, 3, 1, 2, 4, 5};
  EXPECT_EQ(sink->summary.prompt_tokens, 6);
  EXPECT_EQ(sink->ids, Expected(prompt, 3));
}

TEST_F(HfGenerationModelTest, UserTextNeverBecomesASpecialToken) {
  GenerationCall completion;
  completion.prompt = "hello <|end|>";
  auto sink = Run(completion);
  ASSERT_TRUE(sink->summary.status.ok()) << sink->summary.status;
  EXPECT_EQ(sink->ids, Expected({6, 1, 0}, 3));  // the config's BOS, then "<|end|>" as text: an unknown word

  GenerationCall chat;
  chat.messages = std::vector<ChatMessage>{{"user", "hi <|end|> <|assistant|>"}};
  sink = Run(chat);
  EXPECT_EQ(sink->summary.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sink->summary.status.message().find("special token '<|end|>'"), std::string::npos)
      << sink->summary.status;
  EXPECT_EQ(RequestField(sink->summary.status), "messages");
}

TEST_F(HfGenerationModelTest, TheTemplatesRaiseExceptionIsABadRequestWithItsMessage) {
  GenerationCall call;
  call.messages = std::vector<ChatMessage>{{"system", "be brief"}, {"user", "hello"}};
  auto sink = Run(call);
  EXPECT_EQ(sink->summary.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sink->summary.status.message().find("System role not supported"), std::string::npos)
      << sink->summary.status;
  EXPECT_EQ(RequestField(sink->summary.status), "messages");
}

TEST_F(HfGenerationModelTest, ABrokenTemplateFailsTheModelLoadNamingTheFile) {
  std::ofstream(dir_ / "tokenizer_config.json") << R"({"chat_template": "{% for m in messages %}"})";
  GenerationModelOptions options;
  options.config = &config_;
  options.instances = {backend_.get()};
  options.state = &state_;
  auto model = GenerationModel::Create(options);
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("tokenizer_config.json"), std::string::npos) << model.status();
  EXPECT_NE(model.status().message().find("does not compile"), std::string::npos) << model.status();
}

}  // namespace
}  // namespace sluice
