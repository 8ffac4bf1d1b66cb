// Unit tests of sluice-loadtest's KServe v2 REST codec (--protocol http): the binary-data request it sends, the
// responses it reads (binary and JSON data, malformed ones), and HTTP statuses mapped to gRPC codes.
#include <gmock/gmock.h>
#include <grpcpp/support/status_code_enum.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstring>

#include "backend/base/status_mapping.h"
#include "loadtest/kserve/kserve_http.h"

namespace sluice::loadtest {
namespace {

std::string Floats(std::initializer_list<float> values) {
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), std::data(values), bytes.size());
  return bytes;
}

TEST(KserveHttpTest, RequestIsAJsonHeaderFollowedByTheRawInputs) {
  inference::ModelInferRequest request;
  request.set_model_name("asr_ctc");
  request.set_id("r7");
  auto* input = request.add_inputs();
  input->set_name("audio");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(3);
  request.add_raw_input_contents(Floats({0.5f, -1.0f, 2.0f}));
  (*request.mutable_parameters())["priority"].set_int64_param(2);

  const HttpInferBody body = EncodeHttpInferRequest(request, 1500000);
  ASSERT_EQ(body.body.size(), body.header_length + 12);
  EXPECT_EQ(body.body.substr(body.header_length), Floats({0.5f, -1.0f, 2.0f}));
  rapidjson::Document doc;
  doc.Parse(body.body.data(), body.header_length);
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_STREQ(doc["id"].GetString(), "r7");
  const auto& in = doc["inputs"][0];
  EXPECT_STREQ(in["name"].GetString(), "audio");
  EXPECT_STREQ(in["datatype"].GetString(), "FP32");
  EXPECT_EQ(in["shape"][1].GetInt64(), 3);
  EXPECT_EQ(in["parameters"]["binary_data_size"].GetUint64(), 12u);
  EXPECT_TRUE(doc["parameters"]["binary_data_output"].GetBool());
  EXPECT_EQ(doc["parameters"]["timeout"].GetInt64(), 1500000);
  EXPECT_EQ(doc["parameters"]["priority"].GetInt64(), 2);

  // Timeout 0: no "timeout" parameter.
  const HttpInferBody no_timeout = EncodeHttpInferRequest(request, 0);
  rapidjson::Document doc2;
  doc2.Parse(no_timeout.body.data(), no_timeout.header_length);
  EXPECT_FALSE(doc2["parameters"].HasMember("timeout"));
}

TEST(KserveHttpTest, BinaryResponseOutputsTakeTheBytesAfterTheHeader) {
  const std::string header =
      R"({"model_name":"m","model_version":"1","id":"x","outputs":[)"
      R"({"name":"a","datatype":"FP32","shape":[1,2],"parameters":{"binary_data_size":8}},)"
      R"({"name":"b","datatype":"FP32","shape":[1,1],"parameters":{"binary_data_size":4}}]})";
  const std::string body = header + Floats({1, 2}) + Floats({3});
  absl::StatusOr<inference::ModelInferResponse> r = DecodeHttpInferResponse(body, header.size());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model_name(), "m");
  EXPECT_EQ(r->id(), "x");
  ASSERT_EQ(r->outputs_size(), 2);
  EXPECT_EQ(r->outputs(0).name(), "a");
  EXPECT_THAT(r->outputs(0).shape(), ::testing::ElementsAre(1, 2));
  EXPECT_EQ(r->raw_output_contents(0), Floats({1, 2}));
  EXPECT_EQ(r->raw_output_contents(1), Floats({3}));

  EXPECT_FALSE(DecodeHttpInferResponse(header + Floats({1, 2}), header.size()).ok());  // b's bytes are missing
  EXPECT_FALSE(DecodeHttpInferResponse(body, body.size() + 1).ok());
  EXPECT_FALSE(DecodeHttpInferResponse("not json", std::nullopt).ok());
}

TEST(KserveHttpTest, JsonDataIsConvertedToRawBytes) {
  const std::string body =
      R"({"model_name":"m","outputs":[{"name":"e","datatype":"FP32","shape":[1,2,2],"data":[[0.5,1],[2,-3]]},)"
      R"({"name":"n","datatype":"INT64","shape":[2],"data":[7,-8]}]})";
  absl::StatusOr<inference::ModelInferResponse> r = DecodeHttpInferResponse(body, std::nullopt);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->raw_output_contents(0), Floats({0.5f, 1, 2, -3}));
  int64_t ints[2];
  ASSERT_EQ(r->raw_output_contents(1).size(), sizeof(ints));
  std::memcpy(ints, r->raw_output_contents(1).data(), sizeof(ints));
  EXPECT_EQ(ints[0], 7);
  EXPECT_EQ(ints[1], -8);
  // Too few elements for the shape.
  EXPECT_FALSE(DecodeHttpInferResponse(R"({"outputs":[{"name":"e","datatype":"FP32","shape":[3],"data":[1]}]})",
                                       std::nullopt)
                   .ok());
}

// The HTTP client reads a status through the server's table (StatusCodeForHttp) and casts the absl code to
// gRPC's: the two enums share their numbers, so each status must land on the gRPC code it stands for.
TEST(KserveHttpTest, HttpStatusesMapToTheGrpcCodesTheyStandFor) {
  auto grpc_code = [](int http_status) { return static_cast<grpc::StatusCode>(StatusCodeForHttp(http_status)); };
  EXPECT_EQ(grpc_code(200), grpc::StatusCode::OK);
  EXPECT_EQ(grpc_code(400), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(grpc_code(401), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(grpc_code(403), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(grpc_code(404), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(grpc_code(408), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(grpc_code(413), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(grpc_code(429), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(grpc_code(499), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(grpc_code(501), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(grpc_code(503), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(grpc_code(504), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(grpc_code(500), grpc::StatusCode::INTERNAL);
  EXPECT_EQ(grpc_code(502), grpc::StatusCode::INTERNAL);              // other 5xx
  EXPECT_EQ(grpc_code(418), grpc::StatusCode::FAILED_PRECONDITION);   // other 4xx
}

TEST(KserveHttpTest, ErrorMessageIsTheErrorMemberElseTheBodysStart) {
  EXPECT_EQ(HttpErrorMessage(R"({"error":"queue full"})"), "queue full");
  EXPECT_EQ(HttpErrorMessage("plain text"), "plain text");
}

}  // namespace
}  // namespace sluice::loadtest
