// The wire codecs, in-process: KServe v2 REST bodies (JSON and the binary-data extension, including hostile
// nesting and sizes), KServe v2 gRPC messages (raw and typed contents, parameters), and the JSON rendering of the
// protobuf descriptions the HTTP front end serves. Codecs only translate; validation is specified elsewhere.
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include "backend/base/model_config.h"
#include "server/kserve/grpc_codec.h"
#include "server/kserve/http_codec.h"
#include "server/core/input_validation.h"
#include "server/kserve/model_descriptions.h"
#include "server/kserve/proto_json.h"
#include "tests/server/model_yaml.h"

namespace sluice {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::VariantWith;

using testing::TaggerModel;

template <typename T>
std::vector<T> ValuesOf(std::string_view bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

template <typename T>
std::string BytesOf(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

template <typename T>
HostTensor Tensor(DataType dtype, std::vector<int64_t> shape, const std::vector<T>& values) {
  HostTensor tensor{dtype, std::move(shape), std::vector<std::byte>(values.size() * sizeof(T))};
  if (!values.empty()) std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
  return tensor;
}

// A one-input FP32 body whose `data` is `depth` nested arrays around a single 1.
std::string NestedBody(int depth) {
  std::string body = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)";
  body.append(depth, '[');
  body += "1";
  body.append(depth, ']');
  body += "}]}";
  return body;
}

// ---------------------------------------------------------------------------------------------------------------
// DecodeHttpInfer: JSON

TEST(HttpCodecTest, NestedJsonDataIsFlattenedRowMajor) {
  const std::string body =
      R"({"id":"r1","inputs":[{"name":"x","datatype":"FP32","shape":[2,2],"data":[[1,2],[3,4.5]]}]})";
  absl::StatusOr<HttpInferCall> decoded = DecodeHttpInfer(body, std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->call.id, "r1");
  ASSERT_EQ(decoded->call.inputs.size(), 1u);
  const WireTensor& x = decoded->call.inputs[0];
  EXPECT_EQ(x.name, "x");
  EXPECT_EQ(x.datatype, "FP32");
  EXPECT_THAT(x.shape, ElementsAre(2, 2));
  EXPECT_THAT(ValuesOf<float>(x.bytes), ElementsAre(1.f, 2.f, 3.f, 4.5f));
  EXPECT_TRUE(decoded->call.requested_outputs.empty());
}

TEST(HttpCodecTest, IntegerAndBooleanDataBecomeTheirWireWidth) {
  const std::string body = R"({"inputs":[
      {"name":"a","datatype":"INT64","shape":[1,3],"data":[[-1, 9007199254740993, 3]]},
      {"name":"b","datatype":"INT32","shape":[2],"data":[7, -8]},
      {"name":"c","datatype":"BOOL","shape":[3],"data":[true,false,true]}]})";
  absl::StatusOr<HttpInferCall> decoded = DecodeHttpInfer(body, std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(ValuesOf<int64_t>(decoded->call.inputs[0].bytes), ElementsAre(-1, 9007199254740993, 3));
  EXPECT_THAT(ValuesOf<int32_t>(decoded->call.inputs[1].bytes), ElementsAre(7, -8));
  EXPECT_THAT(ValuesOf<uint8_t>(decoded->call.inputs[2].bytes), ElementsAre(1, 0, 1));
}

TEST(HttpCodecTest, ADataElementOfTheWrongKindIsRefusedNamingItsIndex) {
  const std::string body = R"({"inputs":[{"name":"a","datatype":"INT64","shape":[3],"data":[1,2.5,3]}]})";
  absl::Status status = DecodeHttpInfer(body, std::nullopt).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'a': data element 1 is not a INT64 value"));
}

TEST(HttpCodecTest, DataNested40000DeepIsRefusedWithADepthMessageAndDoesNotCrash) {
  for (int depth : {40'000, 100'000}) {
    absl::Status status = DecodeHttpInfer(NestedBody(depth), std::nullopt).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << depth;
    EXPECT_THAT(status.message(), HasSubstr("input 'x': data is nested deeper than 32 levels")) << depth;
  }
}

TEST(HttpCodecTest, NestingUpToTheDepthLimitIsAcceptedAndOneMoreIsNot) {
  absl::StatusOr<HttpInferCall> at_limit = DecodeHttpInfer(NestedBody(kMaxJsonDataDepth), std::nullopt);
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_THAT(ValuesOf<float>(at_limit->call.inputs[0].bytes), ElementsAre(1.f));
  EXPECT_THAT(DecodeHttpInfer(NestedBody(kMaxJsonDataDepth + 1), std::nullopt).status().message(),
              HasSubstr("nested deeper than"));
}

TEST(HttpCodecTest, DeeplyNestedJsonOutsideDataIsAParseOrTypeErrorNotACrash) {
  std::string body = R"({"parameters":{"p":)";
  body.append(100'000, '[');
  body.append(100'000, ']');
  body += R"(},"inputs":[]})";
  absl::Status status = DecodeHttpInfer(body, std::nullopt).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("parameter 'p' must be a boolean, a number or a string"));
}

TEST(HttpCodecTest, MalformedJsonIsRefusedNamingTheOffset) {
  absl::Status status = DecodeHttpInfer(R"({"inputs":[)", std::nullopt).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("malformed JSON at offset"));
  EXPECT_THAT(DecodeHttpInfer("[]", std::nullopt).status().message(), HasSubstr("must be a JSON object"));
  EXPECT_THAT(DecodeHttpInfer("{}", std::nullopt).status().message(), HasSubstr("'inputs' must be an array"));
  EXPECT_THAT(DecodeHttpInfer(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})", std::nullopt).status().message(),
              HasSubstr("each input needs 'name' (string), 'datatype' (string) and 'shape' (array)"));
}

TEST(HttpCodecTest, DataOfADatatypeJsonCannotCarryIsLeftEmptyForValidationToName) {
  absl::StatusOr<HttpInferCall> decoded =
      DecodeHttpInfer(R"({"inputs":[{"name":"x","datatype":"BYTES","shape":[1],"data":["abc"]}]})", std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->call.inputs[0].bytes.empty());
  EXPECT_EQ(decoded->call.inputs[0].datatype, "BYTES");
}

TEST(HttpCodecTest, ParametersOfEveryJsonTypeMapToTheMatchingValue) {
  const std::string body = R"({"parameters":{"b":true,"i":-3,"small":7,"big":9223372036854775808,
      "u":18446744073709551615,"d":1.5,"s":"text"},"inputs":[]})";
  absl::StatusOr<HttpInferCall> decoded = DecodeHttpInfer(body, std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const InferParameters& p = decoded->call.parameters;
  ASSERT_EQ(p.size(), 7u);
  EXPECT_EQ(p[0].first, "b");
  EXPECT_THAT(p[0].second, VariantWith<bool>(true));
  EXPECT_THAT(p[1].second, VariantWith<int64_t>(-3));
  EXPECT_THAT(p[2].second, VariantWith<int64_t>(7));
  EXPECT_THAT(p[3].second, VariantWith<uint64_t>(uint64_t{1} << 63));
  EXPECT_EQ(p[4].first, "u");
  EXPECT_THAT(p[4].second, VariantWith<uint64_t>(std::numeric_limits<uint64_t>::max()));
  EXPECT_THAT(p[5].second, VariantWith<double>(1.5));
  EXPECT_THAT(p[6].second, VariantWith<std::string>("text"));
}

TEST(HttpCodecTest, ParametersThatAreNullArraysOrObjectsAreRefused) {
  for (const char* value : {"null", "[1]", "{\"a\":1}"}) {
    const std::string body = std::string(R"({"parameters":{"k":)") + value + R"(},"inputs":[]})";
    EXPECT_THAT(DecodeHttpInfer(body, std::nullopt).status().message(),
                HasSubstr("parameter 'k' must be a boolean, a number or a string"))
        << value;
  }
  EXPECT_THAT(DecodeHttpInfer(R"({"parameters":[1],"inputs":[]})", std::nullopt).status().message(),
              HasSubstr("'parameters' must be an object"));
}

TEST(HttpCodecTest, RequestedOutputsKeepTheirOrderAndTheirOwnBinaryDataFlag) {
  const std::string body = R"({"inputs":[],"outputs":[{"name":"score","parameters":{"binary_data":true}},
      {"name":"logits"},{"name":"x","parameters":{"binary_data":false}}]})";
  absl::StatusOr<HttpInferCall> decoded = DecodeHttpInfer(body, std::nullopt);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(decoded->call.requested_outputs, ElementsAre("score", "logits", "x"));
  EXPECT_THAT(decoded->binary_output, ElementsAre(std::optional<bool>(true), std::nullopt, std::optional<bool>(false)));
  EXPECT_THAT(DecodeHttpInfer(R"({"inputs":[],"outputs":[{"name":"a","parameters":{"binary_data":1}}]})",
                              std::nullopt)
                  .status()
                  .message(),
              HasSubstr("output 'a': binary_data must be a boolean"));
}

// ---------------------------------------------------------------------------------------------------------------
// DecodeHttpInfer: the binary-data extension

// A JSON header followed by the raw bytes of the inputs that declare binary_data_size.
struct BinaryBody {
  std::string body;
  size_t header_length;
};

BinaryBody WithBinary(const std::string& json, const std::string& binary) { return {json + binary, json.size()}; }

TEST(HttpCodecTest, BinaryInputsAreViewsIntoTheBodyAfterTheHeaderInInputOrder) {
  const std::string json = R"({"inputs":[
      {"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},
      {"name":"j","datatype":"INT64","shape":[1],"data":[5]},
      {"name":"b","datatype":"INT64","shape":[1,1],"parameters":{"binary_data_size":8}}]})";
  BinaryBody b = WithBinary(json, BytesOf<float>({1.5f, -2.f}) + BytesOf<int64_t>({42}));
  absl::StatusOr<HttpInferCall> decoded = DecodeHttpInfer(b.body, b.header_length);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->call.inputs.size(), 3u);
  EXPECT_THAT(ValuesOf<float>(decoded->call.inputs[0].bytes), ElementsAre(1.5f, -2.f));
  EXPECT_EQ(decoded->call.inputs[0].bytes.data(), b.body.data() + b.header_length) << "a view, not a copy";
  EXPECT_THAT(ValuesOf<int64_t>(decoded->call.inputs[1].bytes), ElementsAre(5));
  EXPECT_THAT(ValuesOf<int64_t>(decoded->call.inputs[2].bytes), ElementsAre(42));
}

TEST(HttpCodecTest, AHeaderLengthPastTheBodyIsRefused) {
  const std::string json = R"({"inputs":[]})";
  absl::Status status = DecodeHttpInfer(json, json.size() + 1).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("Inference-Header-Content-Length 14 exceeds the body's 13 bytes"));
}

TEST(HttpCodecTest, AHeaderLengthThatCutsTheJsonShortIsMalformedJson) {
  const std::string json = R"({"inputs":[]})";
  EXPECT_THAT(DecodeHttpInfer(json, json.size() - 1).status().message(), HasSubstr("malformed JSON"));
}

TEST(HttpCodecTest, BinaryDataSizePastTheBodysEndIsRefused) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":9}}]})";
  BinaryBody b = WithBinary(json, BytesOf<float>({1.f, 2.f}));
  absl::Status status = DecodeHttpInfer(b.body, b.header_length).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("input 'a': binary_data_size 9 runs past the body's end"));
}

TEST(HttpCodecTest, AHugeBinaryDataSizeCannotWrapAroundTheOffset) {
  // The first input takes its 8 bytes; a second asking for 2^64-1 (or 2^64-8, which would wrap the offset back
  // to the header) must be refused, not read from anywhere.
  for (const char* huge : {"18446744073709551615", "18446744073709551608"}) {
    const std::string json = std::string(R"({"inputs":[
        {"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},
        {"name":"b","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":)") +
                             huge + "}}]}";
    BinaryBody b = WithBinary(json, BytesOf<float>({1.f, 2.f}) + BytesOf<float>({3.f, 4.f}));
    absl::Status status = DecodeHttpInfer(b.body, b.header_length).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << huge;
    EXPECT_THAT(status.message(), AllOf(HasSubstr("input 'b'"), HasSubstr(huge), HasSubstr("runs past")));
  }
}

TEST(HttpCodecTest, ANegativeOrFractionalBinaryDataSizeIsRefused) {
  for (const char* size : {"-1", "1.5", "\"8\""}) {
    const std::string json = std::string(R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1,2],)") +
                             R"("parameters":{"binary_data_size":)" + size + "}}]}";
    BinaryBody b = WithBinary(json, BytesOf<float>({1.f, 2.f}));
    EXPECT_THAT(DecodeHttpInfer(b.body, b.header_length).status().message(),
                HasSubstr("binary_data_size must be a non-negative integer"))
        << size;
  }
}

TEST(HttpCodecTest, BinaryBytesNoInputClaimsAreRefused) {
  const std::string json =
      R"({"inputs":[{"name":"a","datatype":"FP32","shape":[1,1],"parameters":{"binary_data_size":4}}]})";
  BinaryBody b = WithBinary(json, BytesOf<float>({1.f, 2.f, 3.f}));
  absl::Status status = DecodeHttpInfer(b.body, b.header_length).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("8 bytes of binary data are not claimed by any input"));
  const std::string plain = R"({"inputs":[]})";
  EXPECT_THAT(DecodeHttpInfer(plain + "xyz", plain.size()).status().message(),
              HasSubstr("3 bytes of binary data are not claimed"));
}

// ---------------------------------------------------------------------------------------------------------------
// EncodeHttpInfer / ErrorJson

class HttpEncodeTest : public ::testing::Test {
 protected:
  InferResult Result(std::optional<bool> binary_default) {
    InferResult result;
    result.options.binary_data_output = binary_default;
    result.outputs.push_back({&model_.outputs[1], Tensor<int64_t>(DataType::kInt64, {2, 2}, {1, 2, 3, 4})});
    result.outputs.push_back({&model_.outputs[0], Tensor<float>(DataType::kFp32, {1, 1, 2}, {0.5f, -1.f})});
    return result;
  }
  static rapidjson::Document Header(const HttpBody& body) {
    rapidjson::Document doc;
    doc.Parse(body.body.data(), body.header_length.value_or(body.body.size()));
    EXPECT_FALSE(doc.HasParseError());
    return doc;
  }

  ModelConfig model_ = TaggerModel();
};

TEST_F(HttpEncodeTest, JsonOutputsCarryTheirDataInRequestOrderAndNoHeaderLength) {
  HttpBody body = EncodeHttpInfer(model_, "req-7", {}, Result(std::nullopt));
  EXPECT_FALSE(body.header_length.has_value());
  rapidjson::Document doc = Header(body);
  EXPECT_STREQ(doc["model_name"].GetString(), "tagger");
  EXPECT_STREQ(doc["model_version"].GetString(), "1");
  EXPECT_STREQ(doc["id"].GetString(), "req-7");
  const auto& outputs = doc["outputs"];
  ASSERT_EQ(outputs.Size(), 2u);
  EXPECT_STREQ(outputs[0]["name"].GetString(), "score");
  EXPECT_STREQ(outputs[0]["datatype"].GetString(), "INT64");
  ASSERT_EQ(outputs[0]["shape"].Size(), 2u);
  EXPECT_TRUE(outputs[0]["shape"][0].IsInt64());
  EXPECT_EQ(outputs[0]["data"].Size(), 4u);
  EXPECT_EQ(outputs[0]["data"][3].GetInt64(), 4);
  EXPECT_STREQ(outputs[1]["name"].GetString(), "logits");
  EXPECT_EQ(outputs[1]["data"][1].GetDouble(), -1.0);
  EXPECT_FALSE(outputs[0].HasMember("parameters"));
}

TEST_F(HttpEncodeTest, AnEmptyIdIsLeftOut) {
  rapidjson::Document doc = Header(EncodeHttpInfer(model_, "", {}, Result(std::nullopt)));
  EXPECT_FALSE(doc.HasMember("id"));
}

TEST_F(HttpEncodeTest, BinaryOutputsFollowTheHeaderWithTheirSizesAndTheirOwnFlagWins) {
  // Default binary (binary_data_output: true); the second output asks for JSON itself.
  HttpBody body = EncodeHttpInfer(model_, "", {std::nullopt, false}, Result(true));
  ASSERT_TRUE(body.header_length.has_value());
  rapidjson::Document doc = Header(body);
  const auto& score = doc["outputs"][0];
  EXPECT_FALSE(score.HasMember("data"));
  EXPECT_EQ(score["parameters"]["binary_data_size"].GetUint64(), 32u);
  EXPECT_TRUE(doc["outputs"][1].HasMember("data"));
  EXPECT_FALSE(doc["outputs"][1].HasMember("parameters"));
  ASSERT_EQ(body.body.size(), *body.header_length + 32);
  EXPECT_THAT(ValuesOf<int64_t>(std::string_view(body.body).substr(*body.header_length)), ElementsAre(1, 2, 3, 4));
}

TEST_F(HttpEncodeTest, AnOutputsOwnBinaryFlagAppliesWithoutTheRequestDefault) {
  HttpBody body = EncodeHttpInfer(model_, "", {false, true}, Result(std::nullopt));
  ASSERT_TRUE(body.header_length.has_value());
  rapidjson::Document doc = Header(body);
  EXPECT_TRUE(doc["outputs"][0].HasMember("data"));
  EXPECT_EQ(doc["outputs"][1]["parameters"]["binary_data_size"].GetUint64(), 8u);
  EXPECT_THAT(ValuesOf<float>(std::string_view(body.body).substr(*body.header_length)), ElementsAre(0.5f, -1.f));
}

TEST(HttpErrorJsonTest, TheMessageIsEscapedIntoAnErrorObject) {
  const std::string json = ErrorJson("bad \"x\"\n\\ done");
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  ASSERT_FALSE(doc.HasParseError()) << json;
  EXPECT_STREQ(doc["error"].GetString(), "bad \"x\"\n\\ done");
}

// ---------------------------------------------------------------------------------------------------------------
// gRPC codec

TEST(GrpcCodecTest, TypedContentsBecomeLittleEndianBytesOfTheirDatatype) {
  inference::ModelInferRequest request;
  request.set_id("g1");
  auto* a = request.add_inputs();
  a->set_name("a");
  a->set_datatype("FP32");
  a->add_shape(1);
  a->add_shape(2);
  a->mutable_contents()->add_fp32_contents(1.5f);
  a->mutable_contents()->add_fp32_contents(-3.f);
  auto* b = request.add_inputs();
  b->set_name("b");
  b->set_datatype("INT64");
  b->add_shape(1);
  b->mutable_contents()->add_int64_contents(std::numeric_limits<int64_t>::min());
  auto* c = request.add_inputs();
  c->set_name("c");
  c->set_datatype("INT32");
  c->add_shape(2);
  c->mutable_contents()->add_int_contents(-7);
  c->mutable_contents()->add_int_contents(8);
  auto* d = request.add_inputs();
  d->set_name("d");
  d->set_datatype("BOOL");
  d->add_shape(2);
  d->mutable_contents()->add_bool_contents(true);
  d->mutable_contents()->add_bool_contents(false);
  request.add_outputs()->set_name("score");
  request.add_outputs()->set_name("logits");

  absl::StatusOr<GrpcInferCall> decoded = DecodeInferRequest(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_FALSE(decoded->raw);
  EXPECT_EQ(decoded->call.id, "g1");
  ASSERT_EQ(decoded->call.inputs.size(), 4u);
  EXPECT_THAT(decoded->call.inputs[0].shape, ElementsAre(1, 2));
  EXPECT_THAT(ValuesOf<float>(decoded->call.inputs[0].bytes), ElementsAre(1.5f, -3.f));
  EXPECT_THAT(ValuesOf<int64_t>(decoded->call.inputs[1].bytes), ElementsAre(std::numeric_limits<int64_t>::min()));
  EXPECT_THAT(ValuesOf<int32_t>(decoded->call.inputs[2].bytes), ElementsAre(-7, 8));
  EXPECT_THAT(ValuesOf<uint8_t>(decoded->call.inputs[3].bytes), ElementsAre(1, 0));
  EXPECT_THAT(decoded->call.requested_outputs, ElementsAre("score", "logits"));
}

TEST(GrpcCodecTest, RawContentsAreViewsIntoTheMessageAndMarkTheCallRaw) {
  inference::ModelInferRequest request;
  auto* a = request.add_inputs();
  a->set_name("a");
  a->set_datatype("FP32");
  a->add_shape(2);
  request.add_raw_input_contents(BytesOf<float>({2.f, 4.f}));
  absl::StatusOr<GrpcInferCall> decoded = DecodeInferRequest(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->raw);
  EXPECT_EQ(decoded->call.inputs[0].bytes.data(), request.raw_input_contents(0).data());
  EXPECT_THAT(ValuesOf<float>(decoded->call.inputs[0].bytes), ElementsAre(2.f, 4.f));
}

TEST(GrpcCodecTest, RawContentsMustMatchTheInputCount) {
  inference::ModelInferRequest request;
  for (const char* name : {"a", "b"}) {
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype("FP32");
    input->add_shape(1);
  }
  request.add_raw_input_contents(BytesOf<float>({1.f}));
  absl::Status status = DecodeInferRequest(request).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("raw_input_contents has 1 entries for 2 inputs"));
}

TEST(GrpcCodecTest, TypedContentsAlongsideRawContentsAreRefused) {
  inference::ModelInferRequest request;
  auto* a = request.add_inputs();
  a->set_name("a");
  a->set_datatype("FP32");
  a->add_shape(1);
  a->mutable_contents()->add_fp32_contents(1.f);
  request.add_raw_input_contents(BytesOf<float>({1.f}));
  EXPECT_THAT(DecodeInferRequest(request).status().message(),
              HasSubstr("input 'a' carries typed contents although raw_input_contents is used"));
}

TEST(GrpcCodecTest, TypedContentsOfTheWrongCountAreLeftForValidationToRefuse) {
  ModelConfig model = TaggerModel();
  inference::ModelInferRequest request;
  auto* tokens = request.add_inputs();
  tokens->set_name("tokens");
  tokens->set_datatype("INT64");
  tokens->add_shape(1);
  tokens->add_shape(2);
  tokens->mutable_contents()->add_int64_contents(1);  // shape says 2
  auto* features = request.add_inputs();
  features->set_name("features");
  features->set_datatype("FP32");
  for (int d : {1, 2, 3}) features->add_shape(d);
  for (int i = 0; i < 6; ++i) features->mutable_contents()->add_fp32_contents(0.f);
  absl::StatusOr<GrpcInferCall> decoded = DecodeInferRequest(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_THAT(ValidateInputs(model, decoded->call.inputs).status().message(),
              HasSubstr("input 'tokens': 8 bytes of data, but shape [1,2] of INT64 needs 16 bytes"));
}

TEST(GrpcCodecTest, EveryParameterChoiceMapsToItsValueAndAnUnsetOneIsRefused) {
  google::protobuf::Map<std::string, inference::InferParameter> parameters;
  parameters["b"].set_bool_param(true);
  parameters["i"].set_int64_param(-4);
  parameters["u"].set_uint64_param(std::numeric_limits<uint64_t>::max());
  parameters["d"].set_double_param(0.25);
  parameters["s"].set_string_param("x");
  absl::StatusOr<InferParameters> decoded = DecodeInferParameters(parameters);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  std::map<std::string, ParameterValue> by_key(decoded->begin(), decoded->end());
  ASSERT_EQ(by_key.size(), 5u);
  EXPECT_THAT(by_key["b"], VariantWith<bool>(true));
  EXPECT_THAT(by_key["i"], VariantWith<int64_t>(-4));
  EXPECT_THAT(by_key["u"], VariantWith<uint64_t>(std::numeric_limits<uint64_t>::max()));
  EXPECT_THAT(by_key["d"], VariantWith<double>(0.25));
  EXPECT_THAT(by_key["s"], VariantWith<std::string>("x"));

  parameters["unset"];  // a parameter whose oneof was never set
  absl::Status status = DecodeInferParameters(parameters).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("parameter 'unset' has no value"));
}

TEST(GrpcCodecTest, RequestParametersReachTheCallAndAnUnsetOneFailsTheDecode) {
  inference::ModelInferRequest request;
  (*request.mutable_parameters())["priority"].set_uint64_param(uint64_t{1} << 32);
  absl::StatusOr<GrpcInferCall> decoded = DecodeInferRequest(request);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->call.parameters.size(), 1u);
  EXPECT_THAT(decoded->call.parameters[0].second, VariantWith<uint64_t>(uint64_t{1} << 32));
  (*request.mutable_parameters())["timeout"];
  EXPECT_THAT(DecodeInferRequest(request).status().message(), HasSubstr("parameter 'timeout' has no value"));
}

class GrpcEncodeTest : public ::testing::Test {
 protected:
  InferResult Result() {
    InferResult result;
    result.outputs.push_back({&model_.outputs[1], Tensor<int64_t>(DataType::kInt64, {1, 2}, {7, -8})});
    result.outputs.push_back({&model_.outputs[0], Tensor<float>(DataType::kFp32, {1, 1, 2}, {0.5f, 2.f})});
    return result;
  }
  ModelConfig model_ = TaggerModel();
};

TEST_F(GrpcEncodeTest, TypedAnswersFillEachOutputsContentsInRequestOrder) {
  inference::ModelInferResponse response;
  EncodeInferResponse(model_, "id-3", Result(), /*raw=*/false, response);
  EXPECT_EQ(response.model_name(), "tagger");
  EXPECT_EQ(response.model_version(), "1");
  EXPECT_EQ(response.id(), "id-3");
  EXPECT_EQ(response.raw_output_contents_size(), 0);
  ASSERT_EQ(response.outputs_size(), 2);
  EXPECT_EQ(response.outputs(0).name(), "score");
  EXPECT_EQ(response.outputs(0).datatype(), "INT64");
  EXPECT_THAT(response.outputs(0).shape(), ElementsAre(1, 2));
  EXPECT_THAT(response.outputs(0).contents().int64_contents(), ElementsAre(7, -8));
  EXPECT_EQ(response.outputs(1).name(), "logits");
  EXPECT_THAT(response.outputs(1).shape(), ElementsAre(1, 1, 2));
  EXPECT_THAT(response.outputs(1).contents().fp32_contents(), ElementsAre(0.5f, 2.f));
}

TEST_F(GrpcEncodeTest, RawAnswersPutOneRawEntryPerOutputAndNoTypedContents) {
  inference::ModelInferResponse response;
  EncodeInferResponse(model_, "", Result(), /*raw=*/true, response);
  ASSERT_EQ(response.outputs_size(), 2);
  ASSERT_EQ(response.raw_output_contents_size(), 2);
  EXPECT_FALSE(response.outputs(0).has_contents());
  EXPECT_FALSE(response.outputs(1).has_contents());
  EXPECT_THAT(ValuesOf<int64_t>(response.raw_output_contents(0)), ElementsAre(7, -8));
  EXPECT_THAT(ValuesOf<float>(response.raw_output_contents(1)), ElementsAre(0.5f, 2.f));
}

// KServe v2: "If raw_output_contents is specified, contents must not be specified for any output" — clients
// (tritonclient's as_numpy) index raw_output_contents by the output's position. An FP16 output has no typed field,
// so a typed answer that holds one must still keep raw_output_contents aligned with the outputs.
// BUG (server/kserve/grpc_codec.cc, EncodeInferResponse): a typed answer with an FP16 output gets one raw entry (the
// FP16 one) next to typed contents for the others, so raw_output_contents[0] is read as the first output.
TEST_F(GrpcEncodeTest, ATypedAnswerWithAnFp16OutputKeepsRawContentsAlignedWithTheOutputs) {
  ModelConfig model = model_;
  model.outputs[0].dtype = DataType::kFp16;
  InferResult result;
  result.outputs.push_back({&model.outputs[1], Tensor<int64_t>(DataType::kInt64, {1, 2}, {7, -8})});
  result.outputs.push_back({&model.outputs[0], Tensor<uint16_t>(DataType::kFp16, {1, 1, 2}, {0x3c00, 0x4000})});
  inference::ModelInferResponse response;
  EncodeInferResponse(model, "", std::move(result), /*raw=*/false, response);
  ASSERT_EQ(response.outputs_size(), 2);
  if (response.raw_output_contents_size() > 0) {
    EXPECT_EQ(response.raw_output_contents_size(), response.outputs_size())
        << "raw_output_contents must hold every output, in order, once it is used";
    for (const auto& output : response.outputs()) EXPECT_FALSE(output.has_contents()) << output.name();
  }
}

// ---------------------------------------------------------------------------------------------------------------
// ProtoToKserveJson over the descriptions both transports serve

rapidjson::Document ParseJson(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  EXPECT_FALSE(doc.HasParseError()) << json;
  return doc;
}

TEST(ProtoJsonTest, ModelConfigHasNumericDimsEnumNamesAndParametersAsObjects) {
  ModelConfig model = TaggerModel();
  inference::ModelConfig config;
  FillModelConfig(model, config);
  config.mutable_input(0)->add_dims(int64_t{1} << 40);  // beyond 2^32 stays exact
  rapidjson::Document doc = ParseJson(ProtoToKserveJson(config));
  ASSERT_TRUE(doc.IsObject());
  EXPECT_STREQ(doc["name"].GetString(), "tagger");
  ASSERT_TRUE(doc["max_batch_size"].IsInt());
  EXPECT_EQ(doc["max_batch_size"].GetInt(), 4);
  const auto& input = doc["input"][0];
  EXPECT_STREQ(input["name"].GetString(), "tokens");
  EXPECT_STREQ(input["data_type"].GetString(), "TYPE_INT64");
  ASSERT_TRUE(input["dims"].IsArray());
  ASSERT_EQ(input["dims"].Size(), 2u);
  ASSERT_TRUE(input["dims"][0].IsInt64()) << "int64 as a JSON number, not a string";
  EXPECT_EQ(input["dims"][0].GetInt64(), -1);
  EXPECT_EQ(input["dims"][1].GetInt64(), int64_t{1} << 40);
  EXPECT_TRUE(input["allow_ragged_batch"].IsBool());
  EXPECT_STREQ(doc["input"][1]["data_type"].GetString(), "TYPE_FP32");
  EXPECT_EQ(doc["output"][0]["dims"][1].GetInt64(), 5);
  EXPECT_STREQ(doc["instance_group"][0]["kind"].GetString(), "KIND_CPU");
  EXPECT_EQ(doc["instance_group"][0]["count"].GetInt(), 2);
  const auto& batching = doc["dynamic_batching"];
  ASSERT_TRUE(batching["max_queue_delay_microseconds"].IsUint64());
  EXPECT_EQ(batching["max_queue_delay_microseconds"].GetUint64(), 2500u);
  EXPECT_EQ(batching["default_queue_policy"]["max_queue_size"].GetUint(), 16u);
  EXPECT_STREQ(batching["default_queue_policy"]["timeout_action"].GetString(), "REJECT") << "defaults are printed";
  // The effective levels (the model's, else sluice's defaults 3 and 2), not the proto's 0: priorities 0-3 are taken.
  EXPECT_EQ(batching["priority_levels"].GetUint64(), static_cast<uint64_t>(model.batching.priority_levels));
  EXPECT_EQ(batching["priority_levels"].GetUint64(), 3u);
  EXPECT_EQ(batching["default_priority_level"].GetUint64(), 2u);
  ASSERT_TRUE(doc["parameters"].IsObject());
  EXPECT_STREQ(doc["parameters"]["kind"]["string_value"].GetString(), "text");
  EXPECT_STREQ(doc["parameters"]["bucket_lengths"]["string_value"].GetString(), "4,8");
}

TEST(ProtoJsonTest, ModelMetadataShapesAreNumbersWithTheBatchDimensionFirst) {
  ModelConfig model = TaggerModel();
  inference::ModelMetadataResponse metadata;
  FillModelMetadata(model, metadata);
  rapidjson::Document doc = ParseJson(ProtoToKserveJson(metadata));
  EXPECT_STREQ(doc["name"].GetString(), "tagger");
  EXPECT_STREQ(doc["versions"][0].GetString(), "1");
  const auto& features = doc["inputs"][1];
  EXPECT_STREQ(features["name"].GetString(), "features");
  EXPECT_STREQ(features["datatype"].GetString(), "FP32");
  ASSERT_EQ(features["shape"].Size(), 3u);
  for (const auto& d : features["shape"].GetArray()) EXPECT_TRUE(d.IsInt64());
  EXPECT_EQ(features["shape"][0].GetInt64(), -1);
  EXPECT_EQ(features["shape"][2].GetInt64(), 3);
  EXPECT_EQ(doc["outputs"][1]["shape"][1].GetInt64(), 2);
}

TEST(ProtoJsonTest, ModelStatisticsCountsAreExactNumbers) {
  ModelConfig model = TaggerModel();
  ModelStatsSnapshot stats;
  stats.inference_count = (uint64_t{1} << 53) + 1;  // not representable as a double
  stats.execution_count = 3;
  stats.last_inference_ms = 1'700'000'000'123;
  stats.success = {5, 123'456'789'012};
  stats.batch[4].executions = 2;
  stats.batch[4].compute_infer = {8, 800};
  inference::ModelStatisticsResponse response;
  FillModelStatistics(model, stats, *response.add_model_stats());
  rapidjson::Document doc = ParseJson(ProtoToKserveJson(response));
  const auto& m = doc["model_stats"][0];
  EXPECT_STREQ(m["name"].GetString(), "tagger");
  EXPECT_STREQ(m["version"].GetString(), "1");
  ASSERT_TRUE(m["inference_count"].IsUint64());
  EXPECT_EQ(m["inference_count"].GetUint64(), (uint64_t{1} << 53) + 1);
  EXPECT_EQ(m["last_inference"].GetUint64(), 1'700'000'000'123u);
  EXPECT_EQ(m["inference_stats"]["success"]["count"].GetUint64(), 5u);
  EXPECT_EQ(m["inference_stats"]["success"]["ns"].GetUint64(), 123'456'789'012u);
  EXPECT_EQ(m["inference_stats"]["fail"]["count"].GetUint64(), 0u);
  ASSERT_EQ(m["batch_stats"].Size(), 1u);
  EXPECT_EQ(m["batch_stats"][0]["batch_size"].GetUint64(), 4u);
  EXPECT_EQ(m["batch_stats"][0]["compute_infer"]["count"].GetUint64(), 2u);
  EXPECT_EQ(m["batch_stats"][0]["compute_infer"]["ns"].GetUint64(), 200u);  // per execution: 800 / 8 * 2
}

TEST(ProtoJsonTest, UnsetOneofsAndMessagesAreLeftOutAndSetOnesPrinted) {
  inference::ModelInferResponse response;
  auto* output = response.add_outputs();
  output->set_name("o");
  (*output->mutable_parameters())["binary_data_size"].set_uint64_param(18446744073709551615u);
  rapidjson::Document doc = ParseJson(ProtoToKserveJson(response));
  const auto& o = doc["outputs"][0];
  EXPECT_FALSE(o.HasMember("contents")) << "an unset singular message is left out";
  const auto& parameter = o["parameters"]["binary_data_size"];
  EXPECT_FALSE(parameter.HasMember("bool_param")) << "only the set oneof member is printed";
  ASSERT_TRUE(parameter["uint64_param"].IsUint64());
  EXPECT_EQ(parameter["uint64_param"].GetUint64(), 18446744073709551615u);
  ASSERT_TRUE(doc["raw_output_contents"].IsArray());
  EXPECT_EQ(doc["raw_output_contents"].Size(), 0u);
}

}  // namespace
}  // namespace sluice
