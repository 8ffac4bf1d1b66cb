// The OpenAI embeddings codec (server/llm/frontend/openai_codec.h, /v1/embeddings) without a server: `input` as a
// string or a list, the options, every class of refusal with its "param", and the response in both encodings
// (base64 decoded back to the same little-endian float32 values).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <rapidjson/document.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "server/llm/frontend/openai_codec.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

OpenAiEmbeddingRequest DecodeOk(const std::string& body) {
  absl::StatusOr<OpenAiEmbeddingRequest> request = DecodeOpenAiEmbeddingRequest(body);
  EXPECT_TRUE(request.ok()) << request.status() << " for " << body;
  if (request.ok()) EXPECT_TRUE(request->call.ok()) << request->call.status() << " for " << body;
  if (!request.ok() || !request->call.ok()) {
    OpenAiEmbeddingRequest empty;
    empty.call = EmbeddingCall{};
    return empty;
  }
  return *std::move(request);
}

TEST(OpenAiEmbeddingDecode, OneStringWithDefaults) {
  OpenAiEmbeddingRequest r = DecodeOk(R"({"model": "m", "input": "Hello"})");
  EXPECT_EQ(r.model, "m");
  EXPECT_THAT(r.call->texts, ElementsAre("Hello"));
  EXPECT_FALSE(r.base64);
  EXPECT_FALSE(r.dimensions.has_value());
}

TEST(OpenAiEmbeddingDecode, ListWithEveryOption) {
  OpenAiEmbeddingRequest r = DecodeOk(
      R"({"model": "m", "input": ["a", "b c", "\u00e9"], "encoding_format": "base64", "dimensions": 384,
          "user": "someone"})");
  EXPECT_THAT(r.call->texts, ElementsAre("a", "b c", "\xC3\xA9"));
  EXPECT_TRUE(r.base64);
  EXPECT_EQ(r.dimensions, 384);
  OpenAiEmbeddingRequest nulls = DecodeOk(R"({"model": "m", "input": "x", "encoding_format": null, "user": null})");
  EXPECT_FALSE(nulls.base64);
}

struct Refusal {
  const char* body;
  const char* message;
  const char* param;
};

std::ostream& operator<<(std::ostream& os, const Refusal& r) { return os << r.body; }

class OpenAiEmbeddingDecodeRefuses : public ::testing::TestWithParam<Refusal> {};

TEST_P(OpenAiEmbeddingDecodeRefuses, WithInvalidArgumentNamingTheField) {
  absl::StatusOr<OpenAiEmbeddingRequest> request = DecodeOpenAiEmbeddingRequest(GetParam().body);
  ASSERT_TRUE(request.ok()) << request.status();  // the model is named: the call carries the refusal
  ASSERT_FALSE(request->call.ok());
  EXPECT_EQ(request->call.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(request->call.status().message(), HasSubstr(GetParam().message));
  EXPECT_EQ(OpenAiErrorParam(request->call.status()), GetParam().param);
}

INSTANTIATE_TEST_SUITE_P(
    EveryClass, OpenAiEmbeddingDecodeRefuses,
    ::testing::Values(Refusal{R"({"model": "m"})", "'input' is required", "input"},
                      Refusal{R"({"model": "m", "input": null})", "'input' is required", "input"},
                      Refusal{R"({"model": "m", "input": ""})", "'input' is an empty string", "input"},
                      Refusal{R"({"model": "m", "input": []})", "must not be an empty array", "input"},
                      Refusal{R"({"model": "m", "input": ["a", ""]})", "'input[1]' is an empty string", "input"},
                      Refusal{R"({"model": "m", "input": 7})", "a string or an array of strings", "input"},
                      Refusal{R"({"model": "m", "input": {"a": 1}})", "a string or an array of strings", "input"},
                      Refusal{R"({"model": "m", "input": ["a", true]})", "a string or an array of strings", "input"},
                      Refusal{R"({"model": "m", "input": [101, 102]})", "token-id inputs are not supported", "input"},
                      Refusal{R"({"model": "m", "input": [[101, 102]]})", "token-id inputs are not supported",
                              "input"},
                      Refusal{R"({"model": "m", "input": "x", "encoding_format": "hex"})",
                              "must be \"float\" or \"base64\"", "encoding_format"},
                      Refusal{R"({"model": "m", "input": "x", "encoding_format": 1})", "must be \"float\"",
                              "encoding_format"},
                      Refusal{R"({"model": "m", "input": "x", "dimensions": 1.5})", "'dimensions' must be an integer",
                              "dimensions"},
                      Refusal{R"({"model": "m", "input": "x", "user": 3})", "'user' must be a string", "user"}));

TEST(OpenAiEmbeddingDecode, TooManyInputsAreRefusedWithTheLimit) {
  std::string body = R"({"model": "m", "input": [)";
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) body += i ? ",\"a\"" : "\"a\"";
  body += "]}";
  absl::StatusOr<OpenAiEmbeddingRequest> request = DecodeOpenAiEmbeddingRequest(body);
  ASSERT_TRUE(request.ok());
  ASSERT_FALSE(request->call.ok());
  EXPECT_THAT(request->call.status().message(), HasSubstr("at most 2048"));
}

TEST(OpenAiEmbeddingDecode, ABodyNamingNoModelIsTheRequestsError) {
  for (const char* body : {"{", "[]", R"({"input": "x"})", R"({"model": 1, "input": "x"})"}) {
    absl::StatusOr<OpenAiEmbeddingRequest> request = DecodeOpenAiEmbeddingRequest(body);
    EXPECT_FALSE(request.ok()) << body;
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument) << body;
  }
}

EmbeddingResult TwoVectors() {
  EmbeddingResult result;
  result.vectors = {{0.5f, -0.25f, 1e-7f}, {0.0f, 1.0f, -1.0f}};
  result.prompt_tokens = 9;
  return result;
}

rapidjson::Document Parse(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError()) << json;
  return doc;
}

TEST(OpenAiEmbeddingEncode, FloatListInOpenAisShape) {
  rapidjson::Document doc = Parse(EncodeOpenAiEmbeddingResponse("m", TwoVectors(), /*base64=*/false));
  EXPECT_STREQ(doc["object"].GetString(), "list");
  EXPECT_STREQ(doc["model"].GetString(), "m");
  EXPECT_EQ(doc["usage"]["prompt_tokens"].GetInt(), 9);
  EXPECT_EQ(doc["usage"]["total_tokens"].GetInt(), 9);
  EXPECT_FALSE(doc["usage"].HasMember("completion_tokens"));  // OpenAI's embedding usage has none
  ASSERT_EQ(doc["data"].Size(), 2u);
  for (rapidjson::SizeType i = 0; i < 2; ++i) {
    const auto& item = doc["data"][i];
    EXPECT_STREQ(item["object"].GetString(), "embedding");
    EXPECT_EQ(item["index"].GetInt(), static_cast<int>(i));
    ASSERT_EQ(item["embedding"].Size(), 3u);
    for (rapidjson::SizeType j = 0; j < 3; ++j) {
      // Written from the float as a double: reading it back as a float gives the same float.
      EXPECT_EQ(static_cast<float>(item["embedding"][j].GetDouble()), TwoVectors().vectors[i][j]);
    }
  }
}

TEST(OpenAiEmbeddingEncode, Base64IsLittleEndianFloat32Bytes) {
  rapidjson::Document doc = Parse(EncodeOpenAiEmbeddingResponse("m", TwoVectors(), /*base64=*/true));
  ASSERT_EQ(doc["data"].Size(), 2u);
  for (rapidjson::SizeType i = 0; i < 2; ++i) {
    std::string bytes;
    ASSERT_TRUE(absl::Base64Unescape(doc["data"][i]["embedding"].GetString(), &bytes));
    ASSERT_EQ(bytes.size(), 3 * sizeof(float));
    std::vector<float> values(3);
    std::memcpy(values.data(), bytes.data(), bytes.size());
    EXPECT_EQ(values, TwoVectors().vectors[i]);
  }
  // 0.5f is 00 00 00 3F in little-endian order.
  std::string first;
  ASSERT_TRUE(absl::Base64Unescape(doc["data"][0]["embedding"].GetString(), &first));
  EXPECT_EQ(first.substr(0, 4), std::string("\x00\x00\x00\x3F", 4));
}

}  // namespace
}  // namespace sluice
