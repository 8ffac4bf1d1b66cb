// sluice-loadtest --api triton-stream without a server: the ModelStreamInfer request it sends, read back by
// sluice-server's own decoder (server/llm/frontend/triton_stream_codec.h), so the two sides agree on input names, datatypes
// and sampling keys; the server's responses (text, final flag, errors) folded into an outcome; the verdict and the
// token counts; the error-code reading of error messages (on the server's own messages); the generation-model
// check on the server's own metadata; and the text prompts sized with a tokenizer.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "loadtest/generation/generation_plan.h"
#include "loadtest/generation/triton_stream.h"
#include "loadtest/kserve/infer_client.h"
#include "server/llm/frontend/triton_stream_codec.h"

namespace sluice::loadtest {
namespace {

using ::testing::HasSubstr;

GenerationSpec Spec() {
  GenerationSpec spec;
  spec.model = "llm";
  spec.prompt_text = "The entangled bank";
  spec.prompt_tokens = 5;
  spec.max_tokens = 12;
  spec.ignore_eos = true;
  spec.temperature = 0.0;
  spec.seed = 77;
  return spec;
}

TEST(TritonRequestTest, TheServerDecodesWhatIsSent) {
  inference::ModelInferRequest request;
  ASSERT_TRUE(EncodeTritonGenerate(Spec(), "42", request).ok());
  absl::StatusOr<TritonGenerateRequest> decoded = DecodeTritonGenerate(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->model, "llm");
  EXPECT_EQ(decoded->id, "42");
  EXPECT_TRUE(decoded->stream);
  EXPECT_TRUE(decoded->empty_final);
  EXPECT_EQ(decoded->call.prompt, "The entangled bank");
  EXPECT_FALSE(decoded->call.prompt_ids);
  EXPECT_FALSE(decoded->call.echo);  // exclude_input_in_output
  EXPECT_EQ(decoded->call.max_tokens, 12);
  EXPECT_TRUE(decoded->call.ignore_eos);
  EXPECT_EQ(decoded->call.sampling.temperature, 0.0f);
  EXPECT_EQ(decoded->call.sampling.seed, 77u);

  GenerationSpec defaults;  // nothing optional: the server's defaults (vLLM's temperature 1), EOS honoured
  defaults.model = "llm";
  defaults.prompt_text = "x";
  ASSERT_TRUE(EncodeTritonGenerate(defaults, "1", request).ok());
  decoded = DecodeTritonGenerate(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_FALSE(decoded->call.max_tokens);
  EXPECT_FALSE(decoded->call.ignore_eos);
  EXPECT_EQ(decoded->call.sampling.temperature, 1.0f);
  EXPECT_FALSE(decoded->call.sampling.seed);
}

TEST(TritonRequestTest, TokenIdPromptsCannotBeSent) {
  GenerationSpec spec = Spec();
  spec.prompt_text.clear();
  spec.prompt_ids = {1, 2, 3};
  inference::ModelInferRequest request;
  const absl::Status s = EncodeTritonGenerate(spec, "1", request);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("text"));
}

inference::ModelStreamInferResponse Text(const std::string& id, const std::string* text, bool final) {
  inference::ModelStreamInferResponse response;
  EncodeTritonText("llm", id, text, final, response);  // the server's encoder
  return response;
}

TEST(TritonStreamStateTest, FoldsTheServersResponses) {
  const std::string a = " river", b = "s of", empty;
  TritonStreamState state("7");
  state.Feed(Text("7", &a, false), 0.010);
  state.Feed(Text("7", &empty, false), 0.015);  // no text: not a chunk
  state.Feed(Text("7", &b, false), 0.020);
  EXPECT_FALSE(state.outcome().done);
  state.Feed(Text("7", nullptr, true), 0.021);  // triton_enable_empty_final_response: a bare final flag
  GenerationOutcome o = state.Take();
  EXPECT_TRUE(o.done);
  EXPECT_EQ(o.text, " rivers of");
  EXPECT_THAT(o.chunk_times_s, ::testing::ElementsAre(0.010, 0.020));
  EXPECT_FALSE(o.error_message);

  TritonStreamState with_text_final("8");  // the default final response: an empty text_output
  with_text_final.Feed(Text("8", &a, false), 0.01);
  with_text_final.Feed(Text("8", &empty, true), 0.02);
  EXPECT_TRUE(with_text_final.outcome().done);
  EXPECT_EQ(with_text_final.outcome().chunks(), 1);
}

TEST(TritonStreamStateTest, TypedBytesContentsAreReadToo) {
  inference::ModelStreamInferResponse response;
  auto* infer = response.mutable_infer_response();
  infer->set_id("1");
  auto* output = infer->add_outputs();
  output->set_name("text_output");
  output->set_datatype("BYTES");
  output->mutable_contents()->add_bytes_contents("ab");
  output->mutable_contents()->add_bytes_contents("c");
  (*infer->mutable_parameters())["triton_final_response"].set_bool_param(true);
  TritonStreamState state("1");
  state.Feed(response, 0.5);
  EXPECT_EQ(state.outcome().text, "abc");
  EXPECT_TRUE(state.outcome().done);
}

TEST(TritonStreamStateTest, ProtocolViolationsAreErrors) {
  const std::string a = "a";
  TritonStreamState other("1");
  other.Feed(Text("2", &a, false), 0.1);
  GenerationSpec spec = Spec();
  GenerationOutcome o = other.Take();
  StreamVerdict v = JudgeTritonStream(o, spec);
  EXPECT_EQ(v.code, 13);  // INTERNAL
  EXPECT_THAT(v.message, HasSubstr("request id '2'"));

  TritonStreamState after("1");
  after.Feed(Text("1", nullptr, true), 0.1);
  after.Feed(Text("1", &a, false), 0.2);
  o = after.Take();
  v = JudgeTritonStream(o, spec);
  EXPECT_EQ(v.code, 13);
  EXPECT_THAT(v.message, HasSubstr("after the final"));

  inference::ModelStreamInferResponse broken = Text("1", &a, false);
  broken.mutable_infer_response()->mutable_raw_output_contents(0)->resize(2);  // a cut length prefix
  TritonStreamState malformed("1");
  malformed.Feed(broken, 0.1);
  o = malformed.Take();
  EXPECT_EQ(JudgeTritonStream(o, spec).code, 13);
}

TEST(TritonVerdictTest, CountsAndChecks) {
  GenerationSpec spec = Spec();  // ignore_eos, max_tokens 12, prompt 5 tokens (the client's count)
  GenerationOutcome o;
  o.done = true;
  o.chunk_times_s = {0.1, 0.2, 0.3};
  StreamVerdict v = JudgeTritonStream(o, spec);
  EXPECT_EQ(v.code, 0) << v.message;
  EXPECT_EQ(o.prompt_tokens, 5);
  EXPECT_EQ(o.completion_tokens, 12);  // ignore_eos: exactly max_tokens (3 responses carried them)

  spec.ignore_eos = false;  // the model may stop early: the responses are the count (a lower bound)
  o.completion_tokens.reset();
  EXPECT_EQ(JudgeTritonStream(o, spec).code, 0);
  EXPECT_EQ(o.completion_tokens, 3);

  spec.max_tokens = 2;  // more text responses than tokens allowed
  v = JudgeTritonStream(o, spec);
  EXPECT_EQ(v.code, kUsageMismatchCode);
  EXPECT_THAT(v.message, HasSubstr("3 text responses"));

  GenerationOutcome cut;  // no final response
  cut.chunk_times_s = {0.1};
  v = JudgeTritonStream(cut, Spec());
  EXPECT_EQ(v.code, 14);  // UNAVAILABLE
  EXPECT_THAT(v.message, HasSubstr("triton_final_response"));
}

TEST(TritonVerdictTest, TheServersErrorResponsesKeepTheirCode) {
  auto code_of = [](const absl::Status& status) {
    inference::ModelStreamInferResponse response;
    EncodeTritonError("llm", "3", status, response);  // the server's encoder: the message only
    TritonStreamState state("3");
    state.Feed(response, 0.1);
    GenerationOutcome o = state.Take();
    return JudgeTritonStream(o, Spec()).code;
  };
  // The messages sluice-server sends (model_hub.cc, generation_model.cc, continuous_batcher.cc, the codec).
  EXPECT_EQ(code_of(absl::NotFoundError("unknown model 'x'")), 5);
  EXPECT_EQ(code_of(absl::NotFoundError("model 'asr' is not a text-generation model")), 5);
  EXPECT_EQ(code_of(absl::InvalidArgumentError("the prompt (200 tokens) plus max_tokens (100) exceeds model m's "
                                               "context of 256 tokens")),
            3);
  EXPECT_EQ(code_of(absl::InvalidArgumentError("the prompt is 2000 tokens; model m takes prompts of at most 1024 "
                                               "tokens")),
            3);
  EXPECT_EQ(code_of(absl::InvalidArgumentError("sampling_parameters: 'temperature' must be a number")), 3);
  EXPECT_EQ(code_of(absl::InvalidArgumentError("sampling parameter 'n' is not supported (temperature, ...)")), 3);
  EXPECT_EQ(code_of(absl::ResourceExhaustedError("model m queue is full (max_queue_size 64)")), 8);
  EXPECT_EQ(code_of(absl::UnavailableError("the server is draining; not accepting new requests")), 14);
  EXPECT_EQ(code_of(absl::UnavailableError("the server is loading its models; not ready yet")), 14);
  EXPECT_EQ(code_of(absl::DeadlineExceededError("the request's deadline passed while it waited")), 4);
  EXPECT_EQ(code_of(absl::InternalError("the graph blew up")), 2);  // UNKNOWN: no word to go by
}

TEST(TritonMetadataTest, GenerationModelsPassOthersAreNamed) {
  ModelConfig config;
  config.name = "llm";
  config.kind = ModelKind::kGeneration;
  inference::ModelMetadataResponse generation;
  FillGenerationModelMetadata(config, generation);  // the server's description of a generation model
  EXPECT_TRUE(CheckGenerationMetadata(generation).ok());

  inference::ModelMetadataResponse speech;
  speech.set_name("asr_ctc");
  auto* input = speech.add_inputs();
  input->set_name("audio");
  input->set_datatype("FP32");
  speech.add_outputs()->set_name("log_probs");
  const absl::Status s = CheckGenerationMetadata(speech);
  EXPECT_TRUE(absl::IsFailedPrecondition(s));
  EXPECT_THAT(s.message(), HasSubstr("asr_ctc is not a text-generation model"));
  EXPECT_THAT(s.message(), HasSubstr("audio (FP32)"));
}

// Counts a word as 1 token up to 4 characters, 2 up to 8, else 3; text as the sum over its space-separated words
// (a tokenizer that splits at spaces, as SentencePiece does).
class FakeCounter final : public PromptTokenCounter {
 public:
  int64_t Count(absl::string_view text) const override {
    int64_t n = 0;
    for (absl::string_view w : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
      n += w.size() <= 4 ? 1 : w.size() <= 8 ? 2 : 3;
    }
    return n;
  }
  int64_t added_tokens() const override { return 1; }
};

TEST(TritonPlanTest, TextPromptsHaveTheDrawnTokenCount) {
  GenerationPlanOptions options;
  options.model = "llm";
  options.output_tokens = "fixed:16";
  options.text_prompts = true;
  options.counter = std::make_shared<FakeCounter>();
  options.seed = 5;
  absl::StatusOr<std::unique_ptr<GenerationPlan>> plan = GenerationPlan::Create(options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  FakeCounter counter;
  std::map<std::string, int> distinct;
  for (uint64_t i = 0; i < 200; ++i) {
    const size_t drawn = 1 + (i * 37) % 900;  // up to past the corpus's length (it wraps around)
    const GenerationSpec spec = (*plan)->Make(i, std::vector<int32_t>(drawn, 9));
    EXPECT_TRUE(spec.prompt_ids.empty());
    ASSERT_TRUE(spec.prompt_tokens.has_value());
    EXPECT_EQ(*spec.prompt_tokens, static_cast<int64_t>(drawn)) << i;
    EXPECT_EQ(*spec.prompt_tokens, 1 + counter.Count(spec.prompt_text)) << i;
    EXPECT_EQ(spec.max_tokens, 16);
    ++distinct[spec.prompt_text];
    // Request i is a function of (seed, i).
    EXPECT_EQ((*plan)->Make(i, std::vector<int32_t>(drawn, 9)).prompt_text, spec.prompt_text);
  }
  EXPECT_GT(distinct.size(), 150u);  // seeded starts: different text per request
  EXPECT_THAT((*plan)->PromptSource(), HasSubstr("real-text words"));
}

TEST(TritonPlanTest, TextPromptsNeedATokenizerOrAPromptFile) {
  GenerationPlanOptions options;
  options.model = "llm";
  options.text_prompts = true;
  absl::StatusOr<std::unique_ptr<GenerationPlan>> plan = GenerationPlan::Create(options);
  EXPECT_TRUE(absl::IsInvalidArgument(plan.status()));
  EXPECT_THAT(plan.status().message(), HasSubstr("--tokenizer"));
}

}  // namespace
}  // namespace sluice::loadtest
