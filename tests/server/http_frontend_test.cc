// The real sluice-server process over loopback with an HTTP client (cpp-httplib): KServe v2 REST health,
// metadata, config/stats, infer in JSON and binary-data form against the reference, error JSON + status codes;
// bearer-token auth on gRPC and HTTP, and TLS with a certificate generated here by the openssl CLI. (SIGTERM drain
// over HTTP and gRPC: frontend_queue_test.cc, on a sim model whose timing is fixed.)
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstring>

#include "backend/reference_set.h"
#include "grpc_service.grpc.pb.h"
#include "tests/float_tolerance.h"
#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

std::string FloatsJson(std::span<const float> values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

class HttpFrontendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess("max_message_bytes: 4194304\n");
    ASSERT_TRUE(server_->ready()) << server_->Log();
  }
  static void TearDownTestSuite() { delete server_; }
  static httplib::Client Client() {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(60, 0);
    return client;
  }
  static inline testing::ServerProcess* server_ = nullptr;
};

TEST_F(HttpFrontendTest, HealthMetadataConfigStats) {
  httplib::Client client = Client();
  EXPECT_EQ(client.Get("/v2/health/live")->status, 200);
  EXPECT_EQ(client.Get("/v2/health/ready")->status, 200);
  EXPECT_THAT(client.Get("/v2")->body, HasSubstr("\"name\":\"sluice\""));
  auto metadata = client.Get("/v2/models/asr_ctc");
  EXPECT_EQ(metadata->status, 200);
  EXPECT_THAT(metadata->body, HasSubstr(R"("name":"audio","datatype":"FP32","shape":[-1,-1])"));
  EXPECT_EQ(client.Get("/v2/models/asr_ctc/versions/1/ready")->status, 200);
  EXPECT_THAT(client.Get("/v2/models/text_embed/config")->body, HasSubstr("\"max_batch_size\":8"));
  const std::string asr_config = client.Get("/v2/models/asr_ctc/config")->body;
  EXPECT_THAT(asr_config, HasSubstr(R"("parameters":{"bucket_lengths":{"string_value":"16000,32000,64000,128000,256000"})"));
  EXPECT_THAT(asr_config, HasSubstr(R"("kind":{"string_value":"speech"},"sample_rate":{"string_value":"16000"}})"));
  EXPECT_THAT(client.Get("/v2/models/text_embed/stats")->body, HasSubstr("\"inference_stats\""));
}

TEST_F(HttpFrontendTest, JsonAndBinaryInferMatchReference) {
  httplib::Client client = Client();
  for (const std::string model : {"asr_ctc", "text_embed"}) {
    absl::StatusOr<std::vector<ReferenceCase>> cases = LoadReferenceSet(std::string(SLUICE_MODELS_DIR) + "/" + model);
    ASSERT_TRUE(cases.ok());
    const ReferenceCase& c = cases->front();
    const HostTensor& in = c.inputs[0];
    const std::string input = model == "asr_ctc" ? "audio" : "input_ids";
    const std::string shape = "[1," + std::to_string(in.shape[0]) + "]";
    // Binary-data form: JSON header + raw input bytes, binary output requested.
    std::string header = R"({"inputs":[{"name":")" + input + R"(","datatype":")" + DataTypeName(in.dtype) +
                         R"(","shape":)" + shape + R"(,"parameters":{"binary_data_size":)" +
                         std::to_string(in.bytes.size()) + R"(}}],"outputs":[{"name":")" +
                         (model == "asr_ctc" ? "log_probs" : "embedding") +
                         R"(","parameters":{"binary_data":true}}]})";
    std::string body = header + std::string(reinterpret_cast<const char*>(in.bytes.data()), in.bytes.size());
    httplib::Headers headers{{"Inference-Header-Content-Length", std::to_string(header.size())}};
    auto res = client.Post(("/v2/models/" + model + "/infer").c_str(), headers, body, "application/octet-stream");
    ASSERT_EQ(res->status, 200) << res->body;
    const size_t json_length = std::stoul(res->get_header_value("Inference-Header-Content-Length"));
    const std::string binary = res->body.substr(json_length);
    auto expected = c.outputs[0].values<float>();
    const double tolerance = ::sluice::testing::CrossShapeTolerance(expected);
    ASSERT_EQ(binary.size(), expected.size() * 4) << model;
    for (size_t i = 0; i < expected.size(); ++i) {
      float v;
      std::memcpy(&v, binary.data() + 4 * i, 4);
      ASSERT_NEAR(v, expected[i], tolerance) << model << " binary element " << i;
    }
    // JSON form (text_embed: token ids are exact in JSON).
    if (model == "text_embed") {
      std::string ids = "[";
      for (int64_t v : in.values<int64_t>()) ids += (ids.size() > 1 ? "," : "") + std::to_string(v);
      ids += "]";
      auto json = client.Post("/v2/models/text_embed/infer",
                              R"({"id":"x1","inputs":[{"name":"input_ids","datatype":"INT64","shape":)" + shape +
                                  R"(,"data":)" + ids + "}]}",
                              "application/json");
      ASSERT_EQ(json->status, 200) << json->body;
      EXPECT_THAT(json->body, HasSubstr(R"("id":"x1")"));
      EXPECT_THAT(json->body, HasSubstr(R"("shape":[1,256],"data":[)"));
    }
  }
}

TEST_F(HttpFrontendTest, ErrorsAreJsonWithStatusCodes) {
  httplib::Client client = Client();
  auto unknown = client.Post("/v2/models/nope/infer", "{}", "application/json");
  EXPECT_EQ(unknown->status, 404);
  EXPECT_EQ(unknown->body, R"({"error":"unknown model 'nope'"})");
  EXPECT_EQ(client.Get("/v2/models/asr_ctc/versions/3")->status, 404);
  auto malformed = client.Post("/v2/models/asr_ctc/infer", "{\"inputs\": [", "application/json");
  EXPECT_EQ(malformed->status, 400);
  EXPECT_THAT(malformed->body, HasSubstr("malformed JSON"));
  auto nan = client.Post("/v2/models/asr_ctc/infer",
                         R"({"inputs":[{"name":"audio","datatype":"FP32","shape":[1,2],"data":[0.5, 1e39]}]})",
                         "application/json");
  EXPECT_EQ(nan->status, 400);
  EXPECT_THAT(nan->body, HasSubstr("input 'audio': element 1 is Inf"));
  auto dtype = client.Post("/v2/models/text_embed/infer",
                           R"({"inputs":[{"name":"input_ids","datatype":"FP32","shape":[1,2],"data":[1,2]}]})",
                           "application/json");
  EXPECT_EQ(dtype->status, 400);
  EXPECT_THAT(dtype->body, HasSubstr("datatype FP32 does not match the model's INT64"));
  auto too_large = client.Post("/v2/models/asr_ctc/infer", std::string(5 << 20, ' '), "application/json");
  EXPECT_EQ(too_large->status, 413);
  EXPECT_THAT(too_large->body, HasSubstr("over the limit"));
  // curl -d's default content type: the body is read as the KServe v2 JSON whatever the Content-Type says.
  auto form = client.Post("/v2/models/text_embed/infer",
                          R"({"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,3],"data":[1,2,3]}]})",
                          "application/x-www-form-urlencoded");
  EXPECT_EQ(form->status, 200) << form->body;
  EXPECT_EQ(client.Get("/v2/health/ready")->status, 200);  // still serving
}

TEST(AuthTest, BearerTokenOnGrpcAndHttp) {
  testing::ServerProcess server("auth: {bearer_token: s3cret}\n", {"text_embed"});
  ASSERT_TRUE(server.ready()) << server.Log();
  httplib::Client client("127.0.0.1", server.http_port());
  EXPECT_EQ(client.Get("/v2/health/live")->status, 200);  // probes stay open
  auto denied = client.Get("/v2/models/text_embed");
  EXPECT_EQ(denied->status, 401);
  EXPECT_THAT(denied->body, HasSubstr("missing 'Authorization: Bearer <token>'"));
  EXPECT_EQ(client.Get("/v2/models/text_embed", {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(client.Get("/v2/models/text_embed", {{"Authorization", "Bearer s3cret"}})->status, 200);

  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  inference::ServerMetadataResponse response;
  grpc::ClientContext without;
  EXPECT_EQ(stub->ServerMetadata(&without, {}, &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext with;
  with.AddMetadata("authorization", "Bearer s3cret");
  EXPECT_TRUE(stub->ServerMetadata(&with, {}, &response).ok());
}

TEST(AuthTest, NoTokenConfiguredMeansNoCheck) {
  testing::ServerProcess server("", {"text_embed"});
  ASSERT_TRUE(server.ready()) << server.Log();
  httplib::Client client("127.0.0.1", server.http_port());
  EXPECT_EQ(client.Get("/v2/models/text_embed", {{"Authorization", "Bearer anything"}})->status, 200);
  EXPECT_EQ(client.Get("/v2/models/text_embed")->status, 200);
}

TEST(TlsTest, GrpcAndHttpServeTlsWithGeneratedCertificate) {
  const auto dir = std::filesystem::temp_directory_path() / ("sluice_tls_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string command = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost "
                              "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " + key + " -out " + cert +
                              " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << "openssl CLI is needed (deploy/install-deps.sh installs it)";
  testing::ServerProcess server("tls: {cert: " + cert + ", key: " + key + "}\n", {"text_embed"});
  ASSERT_TRUE(server.ready()) << server.Log();

  httplib::SSLClient https("127.0.0.1", server.http_port());
  https.set_ca_cert_path(cert.c_str());
  https.enable_server_certificate_verification(true);
  auto res = https.Get("/v2/health/ready");
  ASSERT_TRUE(res) << "HTTPS failed: " << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);

  std::ifstream in(cert);
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = std::string(std::istreambuf_iterator<char>(in), {});
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::SslCredentials(ssl)));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  inference::ServerLiveResponse live;
  grpc::Status status = stub->ServerLive(&context, {}, &live);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(live.live());

  auto plain = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext plain_context;
  plain_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_FALSE(plain->ServerLive(&plain_context, {}, &live).ok());
}

}  // namespace
}  // namespace sluice
