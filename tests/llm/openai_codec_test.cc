// The OpenAI codec (server/llm/frontend/openai_codec.h) without a server: request decoding into GenerationCall (every
// field, every class of refusal with its "param"), the whole responses, the streamed chunks, SSE framing, the error
// object and the model list. Encoded JSON is parsed back (RapidJSON) and checked field by field.
#include "server/llm/frontend/openai_codec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <ostream>
#include <string>

#include "server/kserve/http_codec.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError()) << json;
  return doc;
}

OpenAiRequest DecodeOk(OpenAiEndpoint endpoint, const std::string& body) {
  absl::StatusOr<OpenAiRequest> request = DecodeOpenAiRequest(endpoint, body);
  EXPECT_TRUE(request.ok()) << request.status() << " for " << body;
  if (request.ok()) EXPECT_TRUE(request->call.ok()) << request->call.status() << " for " << body;
  if (!request.ok() || !request->call.ok()) {
    OpenAiRequest empty;
    empty.call = GenerationCall{};
    return empty;
  }
  return *std::move(request);
}

TEST(OpenAiDecode, CompletionWithEverySupportedField) {
  OpenAiRequest r = DecodeOk(OpenAiEndpoint::kCompletions, R"({
      "model": "m", "prompt": "Hello", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 40,
      "seed": 1234, "stop": ["a", "bc"], "stream": true, "stream_options": {"include_usage": true},
      "echo": true, "ignore_eos": true, "n": 1, "logprobs": null, "user": "ignored"})");
  EXPECT_EQ(r.model, "m");
  ASSERT_TRUE(r.call->prompt.has_value());
  EXPECT_EQ(*r.call->prompt, "Hello");
  EXPECT_FALSE(r.call->prompt_ids.has_value());
  EXPECT_FALSE(r.call->messages.has_value());
  EXPECT_EQ(r.call->max_tokens, 7);
  EXPECT_FLOAT_EQ(r.call->sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.call->sampling.top_p, 0.9f);
  EXPECT_EQ(r.call->sampling.top_k, 40);
  EXPECT_EQ(r.call->sampling.seed, 1234u);
  EXPECT_THAT(r.call->stop, ElementsAre("a", "bc"));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_TRUE(r.call->echo);
  EXPECT_TRUE(r.call->ignore_eos);
}

TEST(OpenAiDecode, DefaultsAreOpenAisAndNullMeansAbsent) {
  OpenAiRequest r = DecodeOk(OpenAiEndpoint::kCompletions,
                             R"({"model": "m", "prompt": "x", "max_tokens": null, "stop": null, "seed": null})");
  EXPECT_FALSE(r.call->max_tokens.has_value());
  EXPECT_FLOAT_EQ(r.call->sampling.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.call->sampling.top_p, 1.0f);
  EXPECT_EQ(r.call->sampling.top_k, 0);
  EXPECT_FALSE(r.call->sampling.seed.has_value());
  EXPECT_TRUE(r.call->stop.empty());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.call->echo);
  EXPECT_FALSE(r.call->ignore_eos);
}

TEST(OpenAiDecode, PromptAsTokenIdsAndBatchOfOne) {
  OpenAiRequest ids = DecodeOk(OpenAiEndpoint::kCompletions, R"({"model": "m", "prompt": [1, 50, 7]})");
  ASSERT_TRUE(ids.call->prompt_ids.has_value());
  EXPECT_THAT(*ids.call->prompt_ids, ElementsAre(1, 50, 7));
  EXPECT_FALSE(ids.call->prompt.has_value());
  OpenAiRequest one = DecodeOk(OpenAiEndpoint::kCompletions, R"({"model": "m", "prompt": ["only"]})");
  EXPECT_EQ(one.call->prompt.value_or(""), "only");
  OpenAiRequest one_ids = DecodeOk(OpenAiEndpoint::kCompletions, R"({"model": "m", "prompt": [[3, 4]]})");
  EXPECT_THAT(one_ids.call->prompt_ids.value_or(std::vector<int32_t>{}), ElementsAre(3, 4));
}

TEST(OpenAiDecode, StopAsOneStringAndTopKMinusOneMeansAll) {
  OpenAiRequest r = DecodeOk(OpenAiEndpoint::kCompletions, R"({"model": "m", "prompt": "x", "stop": "\n", "top_k": -1})");
  EXPECT_THAT(r.call->stop, ElementsAre("\n"));
  EXPECT_EQ(r.call->sampling.top_k, 0);
}

TEST(OpenAiDecode, ChatMessagesWithTextPartsAndMaxCompletionTokens) {
  OpenAiRequest r = DecodeOk(OpenAiEndpoint::kChat, R"({"model": "m", "max_tokens": 3, "max_completion_tokens": 9,
      "messages": [{"role": "developer", "content": "be brief"},
                   {"role": "user", "content": [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]},
                   {"role": "assistant", "content": null},
                   {"role": "user", "content": "again"}]})");
  ASSERT_TRUE(r.call->messages.has_value());
  ASSERT_EQ(r.call->messages->size(), 4u);
  EXPECT_EQ((*r.call->messages)[0].role, "system");
  EXPECT_EQ((*r.call->messages)[0].content, "be brief");
  EXPECT_EQ((*r.call->messages)[1].content, "Hi there");
  EXPECT_EQ((*r.call->messages)[2].role, "assistant");
  EXPECT_EQ((*r.call->messages)[2].content, "");
  EXPECT_EQ(r.call->max_tokens, 9);  // max_completion_tokens wins
  EXPECT_FALSE(r.call->prompt.has_value());
}

TEST(OpenAiDecode, OutOfIntRangeMaxTokensIsKeptAsGivenForTheRangeCheck) {
  // Issue 23: the range error must report the value the client sent, not int's maximum.
  OpenAiRequest r = DecodeOk(OpenAiEndpoint::kCompletions, R"({"model": "m", "prompt": "x", "max_tokens": 1000000000000})");
  EXPECT_EQ(r.call->max_tokens, int64_t{1000000000000});
}

struct BadCase {
  const char* name;
  OpenAiEndpoint endpoint;
  std::string body;
  const char* message;
  const char* param;
};

void PrintTo(const BadCase& c, std::ostream* os) { *os << c.name; }

class OpenAiDecodeRefuses : public ::testing::TestWithParam<BadCase> {};

// A body that names its model decodes (so that the model counts and answers the refusal) with the error in
// `call`; one that names none is refused whole.
TEST_P(OpenAiDecodeRefuses, WithInvalidArgumentNamingTheField) {
  const BadCase& c = GetParam();
  absl::StatusOr<OpenAiRequest> r = DecodeOpenAiRequest(c.endpoint, c.body);
  const absl::Status status = !r.ok() ? r.status() : r->call.status();
  ASSERT_FALSE(status.ok()) << c.body;
  if (r.ok()) EXPECT_EQ(r->model, "m") << c.body;
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr(c.message));
  EXPECT_EQ(OpenAiErrorParam(status), c.param);
}

std::string Nested(int depth) {
  std::string body = R"({"model": "m", "prompt": "x", "user": )";
  for (int i = 0; i < depth; ++i) body += "[";
  for (int i = 0; i < depth; ++i) body += "]";
  return body + "}";
}

constexpr auto kCmpl = OpenAiEndpoint::kCompletions;
constexpr auto kChat = OpenAiEndpoint::kChat;

INSTANTIATE_TEST_SUITE_P(
    Cases, OpenAiDecodeRefuses,
    ::testing::Values(
        BadCase{"malformed", kCmpl, R"({"model": "m", )", "malformed JSON at offset", ""},
        BadCase{"not_object", kCmpl, R"([1, 2])", "must be a JSON object", ""},
        BadCase{"too_deep", kCmpl, Nested(kMaxJsonDataDepth + 1), "nested deeper than", ""},
        BadCase{"no_model", kCmpl, R"({"prompt": "x"})", "'model' (string) is required", "model"},
        BadCase{"model_number", kCmpl, R"({"model": 3, "prompt": "x"})", "'model' (string) is required", "model"},
        BadCase{"no_prompt", kCmpl, R"({"model": "m"})", "'prompt' is required", "prompt"},
        BadCase{"batched_strings", kCmpl, R"({"model": "m", "prompt": ["a", "b"]})", "batched prompts are not supported",
                "prompt"},
        BadCase{"batched_ids", kCmpl, R"({"model": "m", "prompt": [[1], [2]]})", "batched prompts are not supported",
                "prompt"},
        BadCase{"prompt_object", kCmpl, R"({"model": "m", "prompt": {}})", "must be a string or an array", "prompt"},
        BadCase{"prompt_float_id", kCmpl, R"({"model": "m", "prompt": [1.5]})", "token ids must be integers",
                "prompt"},
        BadCase{"token_id_2_31", kCmpl, R"({"model": "m", "prompt": [1, 2147483648]})",
                "token id 2147483648 (index 1) is out of range", "prompt"},
        BadCase{"max_tokens_over_int64", kCmpl, R"({"model": "m", "prompt": "x", "max_tokens": 18446744073709551615})",
                "'max_tokens' is 18446744073709551615, out of range", "max_tokens"},
        BadCase{"max_tokens_string", kCmpl, R"({"model": "m", "prompt": "x", "max_tokens": "5"})",
                "'max_tokens' must be an integer", "max_tokens"},
        BadCase{"temperature_string", kCmpl, R"({"model": "m", "prompt": "x", "temperature": "hot"})",
                "'temperature' must be a number", "temperature"},
        BadCase{"top_p_bool", kChat, R"({"model": "m", "messages": [], "top_p": true})", "'top_p' must be a number",
                "top_p"},
        BadCase{"top_k_float", kCmpl, R"({"model": "m", "prompt": "x", "top_k": 2.5})", "'top_k' must be an integer",
                "top_k"},
        BadCase{"seed_float", kCmpl, R"({"model": "m", "prompt": "x", "seed": 0.5})", "'seed' must be an integer",
                "seed"},
        BadCase{"stop_number", kCmpl, R"({"model": "m", "prompt": "x", "stop": 5})", "'stop' must be a string",
                "stop"},
        BadCase{"stop_list_number", kCmpl, R"({"model": "m", "prompt": "x", "stop": ["a", 1]})",
                "'stop' must be a string", "stop"},
        BadCase{"stream_string", kCmpl, R"({"model": "m", "prompt": "x", "stream": "yes"})",
                "'stream' must be a boolean", "stream"},
        BadCase{"include_usage_string", kCmpl,
                R"({"model": "m", "prompt": "x", "stream_options": {"include_usage": 1}})", "include_usage",
                "stream_options"},
        BadCase{"n_two", kCmpl, R"({"model": "m", "prompt": "x", "n": 2})", "only n = 1", "n"},
        BadCase{"best_of", kCmpl, R"({"model": "m", "prompt": "x", "best_of": 3})", "only best_of = 1", "best_of"},
        BadCase{"logprobs_int", kCmpl, R"({"model": "m", "prompt": "x", "logprobs": 2})", "logprobs are not supported",
                "logprobs"},
        BadCase{"logprobs_chat", kChat, R"({"model": "m", "messages": [], "logprobs": true})",
                "logprobs are not supported", "logprobs"},
        BadCase{"top_logprobs", kChat, R"({"model": "m", "messages": [], "top_logprobs": 2})",
                "logprobs are not supported", "top_logprobs"},
        BadCase{"presence_penalty", kCmpl, R"({"model": "m", "prompt": "x", "presence_penalty": 0.5})",
                "'presence_penalty' is not supported", "presence_penalty"},
        BadCase{"logit_bias", kCmpl, R"({"model": "m", "prompt": "x", "logit_bias": {"5": 10}})",
                "logit_bias is not supported", "logit_bias"},
        BadCase{"suffix", kCmpl, R"({"model": "m", "prompt": "x", "suffix": "end"})", "suffix is not supported",
                "suffix"},
        BadCase{"tools", kChat, R"({"model": "m", "messages": [], "tools": [{"type": "function"}]})",
                "tools and function calling are not supported", "tools"},
        BadCase{"json_mode", kChat, R"({"model": "m", "messages": [], "response_format": {"type": "json_object"}})",
                "only response_format", "response_format"},
        BadCase{"no_messages", kChat, R"({"model": "m"})", "'messages' must be an array", "messages"},
        BadCase{"message_no_role", kChat, R"({"model": "m", "messages": [{"content": "x"}]})", "needs a 'role'",
                "messages"},
        BadCase{"message_tool_role", kChat, R"({"model": "m", "messages": [{"role": "tool", "content": "x"}]})",
                "role 'tool' is not supported", "messages"},
        BadCase{"message_no_content", kChat, R"({"model": "m", "messages": [{"role": "user"}]})",
                "needs 'content'", "messages"},
        BadCase{"message_image", kChat,
                R"({"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]})",
                "only text content parts", "messages"},
        BadCase{"max_completion_tokens_string", kChat,
                R"({"model": "m", "messages": [], "max_completion_tokens": "9"})",
                "'max_completion_tokens' must be an integer", "max_completion_tokens"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return std::string(info.param.name); });

TEST(OpenAiDecode, DepthAtTheLimitIsAccepted) {
  // The document itself is level 1, "user"'s arrays the levels below it.
  EXPECT_TRUE(DecodeOpenAiRequest(kCmpl, Nested(kMaxJsonDataDepth - 1)).ok());
}

OpenAiResponseHead Head(OpenAiEndpoint endpoint) {
  OpenAiResponseHead head;
  head.endpoint = endpoint;
  head.id = endpoint == kChat ? "chatcmpl-1" : "cmpl-1";
  head.model = "tiny";
  head.created = 1700000000;
  return head;
}

GenerationSummary Summary(FinishReason finish) {
  GenerationSummary s;
  s.finish = finish;
  s.prompt_tokens = 5;
  s.completion_tokens = 3;
  return s;
}

TEST(OpenAiEncode, NewHeadsHaveDistinctPrefixedIdsAndTheCurrentTime) {
  OpenAiResponseHead a = NewOpenAiResponseHead(kCmpl, "m");
  OpenAiResponseHead b = NewOpenAiResponseHead(kCmpl, "m");
  OpenAiResponseHead c = NewOpenAiResponseHead(kChat, "m");
  EXPECT_EQ(a.id.rfind("cmpl-", 0), 0u) << a.id;
  EXPECT_EQ(c.id.rfind("chatcmpl-", 0), 0u) << c.id;
  EXPECT_NE(a.id, b.id);
  EXPECT_NEAR(static_cast<double>(a.created), static_cast<double>(absl::ToUnixSeconds(absl::Now())), 5.0);
}

TEST(OpenAiEncode, WholeCompletion) {
  rapidjson::Document d = Parse(EncodeOpenAiResponse(Head(kCmpl), "a \"quoted\"\n text", Summary(FinishReason::kLength)));
  EXPECT_STREQ(d["id"].GetString(), "cmpl-1");
  EXPECT_STREQ(d["object"].GetString(), "text_completion");
  EXPECT_EQ(d["created"].GetInt64(), 1700000000);
  EXPECT_STREQ(d["model"].GetString(), "tiny");
  ASSERT_EQ(d["choices"].Size(), 1u);
  const auto& choice = d["choices"][0];
  EXPECT_EQ(choice["index"].GetInt(), 0);
  EXPECT_STREQ(choice["text"].GetString(), "a \"quoted\"\n text");
  EXPECT_STREQ(choice["finish_reason"].GetString(), "length");
  EXPECT_TRUE(choice["logprobs"].IsNull());
  EXPECT_EQ(d["usage"]["prompt_tokens"].GetInt(), 5);
  EXPECT_EQ(d["usage"]["completion_tokens"].GetInt(), 3);
  EXPECT_EQ(d["usage"]["total_tokens"].GetInt(), 8);
}

TEST(OpenAiEncode, WholeChatCompletion) {
  rapidjson::Document d = Parse(EncodeOpenAiResponse(Head(kChat), "hi", Summary(FinishReason::kStop)));
  EXPECT_STREQ(d["object"].GetString(), "chat.completion");
  const auto& choice = d["choices"][0];
  EXPECT_STREQ(choice["message"]["role"].GetString(), "assistant");
  EXPECT_STREQ(choice["message"]["content"].GetString(), "hi");
  EXPECT_STREQ(choice["finish_reason"].GetString(), "stop");
  EXPECT_FALSE(choice.HasMember("text"));
  EXPECT_EQ(d["usage"]["total_tokens"].GetInt(), 8);
}

TEST(OpenAiEncode, ChatChunks) {
  rapidjson::Document role = Parse(EncodeOpenAiRoleChunk(Head(kChat)));
  EXPECT_STREQ(role["object"].GetString(), "chat.completion.chunk");
  EXPECT_STREQ(role["choices"][0]["delta"]["role"].GetString(), "assistant");
  EXPECT_TRUE(role["choices"][0]["finish_reason"].IsNull());

  rapidjson::Document text = Parse(EncodeOpenAiTextChunk(Head(kChat), "ab"));
  EXPECT_STREQ(text["choices"][0]["delta"]["content"].GetString(), "ab");
  EXPECT_FALSE(text["choices"][0]["delta"].HasMember("role"));
  EXPECT_TRUE(text["choices"][0]["finish_reason"].IsNull());

  rapidjson::Document finish = Parse(EncodeOpenAiFinishChunk(Head(kChat), FinishReason::kStop));
  EXPECT_TRUE(finish["choices"][0]["delta"].IsObject());
  EXPECT_EQ(finish["choices"][0]["delta"].MemberCount(), 0u);
  EXPECT_STREQ(finish["choices"][0]["finish_reason"].GetString(), "stop");
  EXPECT_FALSE(finish.HasMember("usage"));

  rapidjson::Document usage = Parse(EncodeOpenAiUsageChunk(Head(kChat), Summary(FinishReason::kStop)));
  EXPECT_STREQ(usage["object"].GetString(), "chat.completion.chunk");
  EXPECT_EQ(usage["choices"].Size(), 0u);
  EXPECT_EQ(usage["usage"]["completion_tokens"].GetInt(), 3);
}

TEST(OpenAiEncode, CompletionChunks) {
  rapidjson::Document text = Parse(EncodeOpenAiTextChunk(Head(kCmpl), "x"));
  EXPECT_STREQ(text["object"].GetString(), "text_completion");
  EXPECT_STREQ(text["choices"][0]["text"].GetString(), "x");
  EXPECT_TRUE(text["choices"][0]["finish_reason"].IsNull());
  rapidjson::Document finish = Parse(EncodeOpenAiFinishChunk(Head(kCmpl), FinishReason::kLength));
  EXPECT_STREQ(finish["choices"][0]["text"].GetString(), "");
  EXPECT_STREQ(finish["choices"][0]["finish_reason"].GetString(), "length");
}

TEST(OpenAiEncode, SseFraming) {
  EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
  // JSON never holds a raw newline (strings escape it), so one event is one data line.
  const std::string event = SseEvent(EncodeOpenAiTextChunk(Head(kCmpl), "line1\nline2\r\n"));
  EXPECT_EQ(event.find('\n'), event.size() - 2);
  EXPECT_EQ(event.find('\r'), std::string::npos);
}

TEST(OpenAiEncode, ErrorObjectTypesFollowTheStatusTable) {
  struct Case {
    absl::Status status;
    const char* type;
  };
  for (const Case& c : {Case{absl::InvalidArgumentError("bad"), "invalid_request_error"},
                        Case{absl::NotFoundError("unknown model 'x'"), "invalid_request_error"},
                        Case{absl::UnauthenticatedError("no token"), "authentication_error"},
                        Case{absl::ResourceExhaustedError("queue full"), "rate_limit_error"},
                        Case{absl::UnavailableError("draining"), "server_error"},
                        Case{absl::InternalError("boom"), "server_error"}}) {
    rapidjson::Document d = Parse(OpenAiErrorJson(c.status));
    ASSERT_TRUE(d["error"].IsObject());
    EXPECT_EQ(std::string(d["error"]["message"].GetString()), c.status.message());
    EXPECT_STREQ(d["error"]["type"].GetString(), c.type) << c.status;
    EXPECT_TRUE(d["error"]["param"].IsNull());
    EXPECT_TRUE(d["error"]["code"].IsNull());
  }
  rapidjson::Document coded = Parse(OpenAiErrorJson(absl::NotFoundError("unknown model 'x'"), "model_not_found"));
  EXPECT_STREQ(coded["error"]["code"].GetString(), "model_not_found");
  absl::StatusOr<OpenAiRequest> bad = DecodeOpenAiRequest(kCmpl, R"({"model": "m", "prompt": "x", "n": 3})");
  ASSERT_TRUE(bad.ok());
  rapidjson::Document with_param = Parse(OpenAiErrorJson(bad->call.status()));
  EXPECT_STREQ(with_param["error"]["param"].GetString(), "n");
  // Range errors come from GenerationModel with the field attached the same way.
  rapidjson::Document range = Parse(OpenAiErrorJson(
      WithRequestField(absl::InvalidArgumentError("max_tokens must be at least 1 (got 0)"), "max_tokens")));
  EXPECT_STREQ(range["error"]["param"].GetString(), "max_tokens");
}

// Issue 23: invalid UTF-8 in what a body repeats (an echoed prompt, a model name in a 404, a role in a 400) was
// written raw, so the body was not JSON. Every string now goes out valid, bad bytes as U+FFFD.
TEST(OpenAiEncode, InvalidUtf8IsReplacedSoEveryBodyIsValidJson) {
  const std::string bad = "ok\xff\xc3(\xed\xa0\x80\xf4\x90\x80\x80" "end";
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8(bad), "ok" + fffd + fffd + "(" + fffd + fffd + fffd + fffd + fffd + fffd + fffd + "end");
  EXPECT_EQ(ValidUtf8("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80"), "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80");
  for (const std::string& body :
       {OpenAiErrorJson(absl::NotFoundError("unknown model '" + bad + "'"), "model_not_found"),
        OpenAiErrorJson(absl::InvalidArgumentError("message role '" + bad + "' is not supported")),
        EncodeOpenAiTextChunk(Head(kCmpl), bad),
        EncodeOpenAiResponse(Head(kChat), bad, Summary(FinishReason::kStop))}) {
    rapidjson::Document d;
    d.Parse<rapidjson::kParseValidateEncodingFlag>(body.c_str(), body.size());
    EXPECT_FALSE(d.HasParseError()) << body;
  }
}

TEST(OpenAiEncode, ModelList) {
  rapidjson::Document d = Parse(EncodeOpenAiModelList({{"a"}, {"b", 1024, 2000, 512}}, 42));
  EXPECT_STREQ(d["object"].GetString(), "list");
  ASSERT_EQ(d["data"].Size(), 2u);
  EXPECT_STREQ(d["data"][1]["id"].GetString(), "b");
  EXPECT_STREQ(d["data"][1]["object"].GetString(), "model");
  EXPECT_EQ(d["data"][1]["created"].GetInt64(), 42);
  EXPECT_STREQ(d["data"][1]["owned_by"].GetString(), "sluice");
  EXPECT_EQ(d["data"][1]["max_model_len"].GetInt64(), 1024);
  EXPECT_EQ(d["data"][1]["vocab_size"].GetInt64(), 2000);
  EXPECT_EQ(d["data"][1]["max_prompt_tokens"].GetInt64(), 512);
  EXPECT_FALSE(d["data"][0].HasMember("vocab_size"));  // a limit not known is left out, not 0
  EXPECT_EQ(Parse(EncodeOpenAiModelList({}, 1))["data"].Size(), 0u);
}

}  // namespace
}  // namespace sluice
