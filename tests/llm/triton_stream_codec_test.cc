// The Triton decoupled text-generation codec (server/llm/frontend/triton_stream_codec.h) without a server: requests as
// tritonclient builds them (raw_input_contents) and with typed contents, sampling_parameters JSON, TensorRT-LLM
// scalars and request parameters with their precedence, prompt echo rules, every class of refusal, and the
// responses (text_output BYTES, triton_final_response, errors) and generation model descriptions.
#include "server/llm/frontend/triton_stream_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <ostream>
#include <string>

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Builds requests the way tritonclient does: every input's bytes in raw_input_contents.
class RequestBuilder {
 public:
  explicit RequestBuilder(const std::string& model = "llm", const std::string& id = "r1") {
    request_.set_model_name(model);
    request_.set_id(id);
  }
  RequestBuilder& Bytes(const std::string& name, const std::string& value) {
    return Raw(name, "BYTES", SerializeBytesElement(value));
  }
  RequestBuilder& Bool(const std::string& name, bool value) { return Raw(name, "BOOL", std::string(1, value ? 1 : 0)); }
  template <typename T>
  RequestBuilder& Scalar(const std::string& name, const std::string& datatype, T value) {
    std::string bytes(sizeof value, '\0');
    std::memcpy(bytes.data(), &value, sizeof value);
    return Raw(name, datatype, bytes);
  }
  RequestBuilder& Raw(const std::string& name, const std::string& datatype, const std::string& bytes) {
    auto* input = request_.add_inputs();
    input->set_name(name);
    input->set_datatype(datatype);
    input->add_shape(1);
    request_.add_raw_input_contents(bytes);
    return *this;
  }
  template <typename F>
  RequestBuilder& Param(const std::string& key, F set) {
    set((*request_.mutable_parameters())[key]);
    return *this;
  }
  const inference::ModelInferRequest& get() const { return request_; }

 private:
  inference::ModelInferRequest request_;
};

TritonGenerateRequest DecodeOk(const inference::ModelInferRequest& request) {
  absl::StatusOr<TritonGenerateRequest> decoded = DecodeTritonGenerate(request);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  return decoded.ok() ? *std::move(decoded) : TritonGenerateRequest{};
}

TEST(TritonDecode, VllmStyleStreamingRequest) {
  TritonGenerateRequest r = DecodeOk(
      RequestBuilder("llm", "req-7")
          .Bytes("text_input", "Once upon")
          .Bool("stream", true)
          .Scalar("max_tokens", "INT32", int32_t{12})
          .Bytes("sampling_parameters",
                 R"({"temperature": "0.25", "top_p": 0.5, "top_k": 5, "seed": 18446744073709551615,
                     "stop": ["x", "yz"], "ignore_eos": true})")
          .Bool("exclude_input_in_output", true)
          .get());
  EXPECT_EQ(r.model, "llm");
  EXPECT_EQ(r.id, "req-7");
  EXPECT_EQ(r.call.prompt.value_or(""), "Once upon");
  EXPECT_TRUE(r.stream);
  EXPECT_FALSE(r.call.echo);
  EXPECT_EQ(r.call.max_tokens, 12);
  EXPECT_FLOAT_EQ(r.call.sampling.temperature, 0.25f);
  EXPECT_FLOAT_EQ(r.call.sampling.top_p, 0.5f);
  EXPECT_EQ(r.call.sampling.top_k, 5);
  EXPECT_EQ(r.call.sampling.seed, 18446744073709551615ull);
  EXPECT_THAT(r.call.stop, ElementsAre("x", "yz"));
  EXPECT_TRUE(r.call.ignore_eos);
  EXPECT_FALSE(r.empty_final);
}

TEST(TritonDecode, DefaultsAreNotStreamedWithThePromptEchoed) {
  TritonGenerateRequest r = DecodeOk(RequestBuilder().Bytes("text_input", "Hi").get());
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.call.echo);  // vLLM's backend: a non-streamed answer starts with the prompt
  EXPECT_FALSE(r.call.max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.call.sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.call.sampling.top_p, 1.0f);
  TritonGenerateRequest excluded =
      DecodeOk(RequestBuilder().Bytes("text_input", "Hi").Bool("exclude_input_in_output", true).get());
  EXPECT_FALSE(excluded.call.echo);
}

TEST(TritonDecode, InputsWinOverSamplingParametersWhichWinOverRequestParameters) {
  TritonGenerateRequest r = DecodeOk(
      RequestBuilder()
          .Param("max_tokens", [](auto& p) { p.set_int64_param(3); })
          .Param("temperature", [](auto& p) { p.set_double_param(0.9); })
          .Param("top_k", [](auto& p) { p.set_int64_param(9); })
          .Param("stop", [](auto& p) { p.set_string_param("END"); })
          .Param("triton_enable_empty_final_response", [](auto& p) { p.set_bool_param(true); })
          .Param("stream", [](auto& p) { p.set_bool_param(true); })
          .Param("priority", [](auto& p) { p.set_uint64_param(1); })  // Triton's own keys pass
          .Bytes("sampling_parameters", R"({"max_tokens": 4, "temperature": 0.5})")
          .Bytes("text_input", "p")
          .Scalar("max_tokens", "INT64", int64_t{5})
          .Scalar("random_seed", "UINT64", uint64_t{77})
          .get());
  EXPECT_EQ(r.call.max_tokens, 5);                           // input
  EXPECT_FLOAT_EQ(r.call.sampling.temperature, 0.5f);        // sampling_parameters
  EXPECT_EQ(r.call.sampling.top_k, 9);                       // request parameter
  EXPECT_THAT(r.call.stop, ElementsAre("END"));
  EXPECT_EQ(r.call.sampling.seed, 77u);
  EXPECT_TRUE(r.empty_final);
  EXPECT_TRUE(r.stream);
}

TEST(TritonDecode, TypedBytesContentsAreAcceptedToo) {
  inference::ModelInferRequest request;
  request.set_model_name("llm");
  auto* input = request.add_inputs();
  input->set_name("text_input");
  input->set_datatype("BYTES");
  input->add_shape(1);
  input->mutable_contents()->add_bytes_contents("typed prompt");
  auto* stream = request.add_inputs();
  stream->set_name("stream");
  stream->set_datatype("BOOL");
  stream->add_shape(1);
  stream->mutable_contents()->add_bool_contents(true);
  TritonGenerateRequest r = DecodeOk(request);
  EXPECT_EQ(r.call.prompt.value_or(""), "typed prompt");
  EXPECT_TRUE(r.stream);
}

struct BadCase {
  const char* name;
  inference::ModelInferRequest request;
  const char* message;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class TritonDecodeRefuses : public ::testing::TestWithParam<BadCase> {};

TEST_P(TritonDecodeRefuses, WithInvalidArgumentNamingWhatIsWrong) {
  absl::StatusOr<TritonGenerateRequest> r = DecodeTritonGenerate(GetParam().request);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(GetParam().message));
}

inference::ModelInferRequest WithOutput(const std::string& output) {
  inference::ModelInferRequest request = RequestBuilder().Bytes("text_input", "x").get();
  request.add_outputs()->set_name(output);
  return request;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TritonDecodeRefuses,
    ::testing::Values(
        BadCase{"no_text", RequestBuilder().Bool("stream", true).get(), "input 'text_input' is required"},
        BadCase{"text_not_bytes", RequestBuilder().Scalar("text_input", "INT32", int32_t{1}).get(),
                "input 'text_input' must be BYTES"},
        BadCase{"two_texts",
                RequestBuilder().Raw("text_input", "BYTES", SerializeBytesElement("a") + SerializeBytesElement("b")).get(),
                "exactly one BYTES element"},
        BadCase{"short_bytes", RequestBuilder().Raw("text_input", "BYTES", std::string("\x05\x00", 2)).get(),
                "exactly one BYTES element"},
        BadCase{"stream_int", RequestBuilder().Bytes("text_input", "x").Scalar("stream", "INT32", int32_t{1}).get(),
                "input 'stream' must be BOOL"},
        BadCase{"max_tokens_bytes", RequestBuilder().Bytes("text_input", "x").Bytes("max_tokens", "5").get(),
                "expected a number"},
        BadCase{"max_tokens_two", RequestBuilder().Bytes("text_input", "x").Raw("max_tokens", "INT32", std::string(8, '\0')).get(),
                "exactly one element"},
        BadCase{"unknown_input", RequestBuilder().Bytes("text_input", "x").Bytes("image", "x").get(),
                "input 'image' is not one of"},
        BadCase{"sampling_not_json", RequestBuilder().Bytes("text_input", "x").Bytes("sampling_parameters", "{oops").get(),
                "'sampling_parameters' must be a JSON object"},
        BadCase{"sampling_unknown_key",
                RequestBuilder().Bytes("text_input", "x").Bytes("sampling_parameters", R"({"beam_width": 2})").get(),
                "sampling parameter 'beam_width' is not supported"},
        BadCase{"sampling_bad_number",
                RequestBuilder().Bytes("text_input", "x").Bytes("sampling_parameters", R"({"temperature": "warm"})").get(),
                "'temperature' must be a number"},
        BadCase{"sampling_fractional_top_k",
                RequestBuilder().Bytes("text_input", "x").Bytes("sampling_parameters", R"({"top_k": 1.5})").get(),
                "'top_k' must be an integer"},
        BadCase{"sampling_bad_stop",
                RequestBuilder().Bytes("text_input", "x").Bytes("sampling_parameters", R"({"stop": [1]})").get(),
                "'stop' must be a string or an array of strings"},
        BadCase{"param_bad_type",
                RequestBuilder().Bytes("text_input", "x").Param("max_tokens", [](auto& p) { p.set_string_param("many"); }).get(),
                "'max_tokens' must be an integer"},
        BadCase{"empty_final_not_bool",
                RequestBuilder()
                    .Bytes("text_input", "x")
                    .Param("triton_enable_empty_final_response", [](auto& p) { p.set_int64_param(1); })
                    .get(),
                "'triton_enable_empty_final_response' must be a boolean"},
        BadCase{"param_without_value",
                RequestBuilder().Bytes("text_input", "x").Param("max_tokens", [](auto&) {}).get(), "has no value"},
        BadCase{"echo_in_stream",
                RequestBuilder().Bytes("text_input", "x").Bool("stream", true).Bool("exclude_input_in_output", false).get(),
                "not supported with stream = true"},
        BadCase{"unknown_output", WithOutput("logits"), "output 'logits' unknown"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

std::string TextOf(const inference::ModelInferResponse& response) {
  EXPECT_EQ(response.raw_output_contents_size(), 1);
  const std::string& raw = response.raw_output_contents(0);
  uint32_t length = 0;
  std::memcpy(&length, raw.data(), 4);
  EXPECT_EQ(raw.size(), 4 + length);
  return raw.substr(4);
}

TEST(TritonEncode, TextResponseCarriesTextOutputAndTheFinalFlag) {
  inference::ModelStreamInferResponse response;
  const std::string text = "tok\xC3\xA9";
  EncodeTritonText("llm", "r1", &text, /*final=*/false, response);
  EXPECT_TRUE(response.error_message().empty());
  const auto& infer = response.infer_response();
  EXPECT_EQ(infer.model_name(), "llm");
  EXPECT_EQ(infer.model_version(), "1");
  EXPECT_EQ(infer.id(), "r1");
  ASSERT_EQ(infer.outputs_size(), 1);
  EXPECT_EQ(infer.outputs(0).name(), "text_output");
  EXPECT_EQ(infer.outputs(0).datatype(), "BYTES");
  EXPECT_THAT(infer.outputs(0).shape(), ElementsAre(1));
  EXPECT_EQ(TextOf(infer), text);
  ASSERT_EQ(infer.parameters().count("triton_final_response"), 1u);
  EXPECT_FALSE(infer.parameters().at("triton_final_response").bool_param());

  EncodeTritonText("llm", "r1", nullptr, /*final=*/true, response);
  EXPECT_EQ(response.infer_response().outputs_size(), 0);
  EXPECT_EQ(response.infer_response().raw_output_contents_size(), 0);
  EXPECT_TRUE(response.infer_response().parameters().at("triton_final_response").bool_param());
}

TEST(TritonEncode, ErrorResponseNamesTheRequest) {
  inference::ModelStreamInferResponse response;
  EncodeTritonError("llm", "r9", absl::InvalidArgumentError("max_tokens must be at least 1"), response);
  EXPECT_EQ(response.error_message(), "max_tokens must be at least 1");
  EXPECT_EQ(response.infer_response().id(), "r9");
  EXPECT_EQ(response.infer_response().outputs_size(), 0);
  EXPECT_TRUE(response.infer_response().parameters().at("triton_final_response").bool_param());
}

TEST(TritonEncode, GenerationModelDescriptions) {
  ModelConfig model;
  model.name = "llm";
  inference::ModelMetadataResponse metadata;
  FillGenerationModelMetadata(model, metadata);
  EXPECT_EQ(metadata.name(), "llm");
  EXPECT_THAT(metadata.versions(), ElementsAre("1"));
  ASSERT_GE(metadata.inputs_size(), 1);
  EXPECT_EQ(metadata.inputs(0).name(), "text_input");
  EXPECT_EQ(metadata.inputs(0).datatype(), "BYTES");
  EXPECT_THAT(metadata.inputs(0).shape(), ElementsAre(1));
  ASSERT_EQ(metadata.outputs_size(), 1);
  EXPECT_EQ(metadata.outputs(0).name(), "text_output");
  EXPECT_THAT(metadata.outputs(0).shape(), ElementsAre(-1));

  inference::ModelConfig config;
  FillGenerationModelConfig(model, config);
  EXPECT_EQ(config.name(), "llm");
  EXPECT_EQ(config.max_batch_size(), 0);
  EXPECT_EQ(config.input(0).name(), "text_input");
  EXPECT_EQ(config.input(0).data_type(), inference::TYPE_STRING);
  EXPECT_FALSE(config.input(0).optional());
  for (int i = 1; i < config.input_size(); ++i) EXPECT_TRUE(config.input(i).optional()) << config.input(i).name();
  EXPECT_EQ(config.output(0).name(), "text_output");
  EXPECT_EQ(config.output(0).data_type(), inference::TYPE_STRING);
}

}  // namespace
}  // namespace sluice
