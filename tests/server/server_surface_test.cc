// What the real sluice-server process says about itself, over both transports: KServe model metadata, config and
// readiness agree between gRPC and HTTP for every model kind (speech, text, generic, generation); the config reports
// the effective priority levels; cost series cover generation models and "$ per 1k inferences" is absent before the
// first inference; `--version` prints the version ServerMetadata reports.
// One server for the whole file: the example models asr_ctc, text_embed and llama_tiny plus a generic sim model.
#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "grpc_service.grpc.pb.h"
#include "tests/server/metrics_samples.h"
#include "tests/server/server_process.h"
#include "tests/server/sim_models.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

const char* const kModels[] = {"asr_ctc", "text_embed", "llama_tiny", "echo"};  // speech, text, generation, generic
const char* const kCostedModels[] = {"asr_ctc", "text_embed", "llama_tiny", "echo", "idle"};

class ServerSurfaceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                            ("sluice_surface_repo_" + std::to_string(::getpid())));
    std::filesystem::remove_all(*repository_);
    std::filesystem::create_directories(*repository_);
    for (const char* model : {"asr_ctc", "text_embed", "llama_tiny"}) {
      std::filesystem::create_directory_symlink(std::filesystem::path(SLUICE_MODELS_DIR) / model,
                                                *repository_ / model);
    }
    testing::WriteSimModel(*repository_, {.name = "echo", .length = 8, .batch_sizes = "1, 2"});
    testing::WriteSimModel(*repository_, {.name = "idle", .length = 8});  // no inference before the cost test's
    testing::ServerProcess::Options options;
    options.source_repository = repository_->string();
    options.extra_yaml = "cost: {hourly_usd: 3.6, accelerators: 8, source: test price}\n";
    server_ = new testing::ServerProcess(options);
  }
  static void TearDownTestSuite() {
    delete server_;
    std::error_code ignored;
    std::filesystem::remove_all(*repository_, ignored);
    delete repository_;
  }
  void SetUp() override { ASSERT_TRUE(server_->ready()) << server_->Log(); }

  static std::unique_ptr<inference::GRPCInferenceService::Stub> Stub() {
    return inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }
  static std::unique_ptr<grpc::ClientContext> Context() {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return context;
  }
  static httplib::Client Http() {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(10, 0);
    return client;
  }
  template <class Message>
  static Message FromJson(const std::string& json) {
    Message message;
    google::protobuf::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;  // every field HTTP sends must be one gRPC has
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &message, options).ok()) << json;
    return message;
  }

  static std::filesystem::path* repository_;
  static testing::ServerProcess* server_;
};

std::filesystem::path* ServerSurfaceTest::repository_ = nullptr;
testing::ServerProcess* ServerSurfaceTest::server_ = nullptr;

TEST_F(ServerSurfaceTest, GrpcAndHttpDescribeEveryModelKindAlike) {
  auto stub = Stub();
  httplib::Client http = Http();
  for (const std::string model : kModels) {
    SCOPED_TRACE(model);
    inference::ModelMetadataRequest metadata_request;
    metadata_request.set_name(model);
    inference::ModelMetadataResponse grpc_metadata;
    grpc::Status status = stub->ModelMetadata(Context().get(), metadata_request, &grpc_metadata);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(grpc_metadata.name(), model);
    auto res = http.Get(("/v2/models/" + model).c_str());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const auto http_metadata = FromJson<inference::ModelMetadataResponse>(res->body);
    std::string difference;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&difference);
    EXPECT_TRUE(differ.Compare(grpc_metadata, http_metadata)) << difference;

    inference::ModelReadyRequest ready_request;
    ready_request.set_name(model);
    inference::ModelReadyResponse ready;
    ASSERT_TRUE(stub->ModelReady(Context().get(), ready_request, &ready).ok());
    EXPECT_TRUE(ready.ready());
    res = http.Get(("/v2/models/" + model + "/ready").c_str());
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200) << res->body;

    inference::ModelConfigRequest config_request;
    config_request.set_name(model);
    inference::ModelConfigResponse grpc_config;
    ASSERT_TRUE(stub->ModelConfig(Context().get(), config_request, &grpc_config).ok());
    res = http.Get(("/v2/models/" + model + "/config").c_str());
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    difference.clear();
    EXPECT_TRUE(differ.Compare(grpc_config.config(), FromJson<inference::ModelConfig>(res->body))) << difference;
  }

  // A name served by neither: NotFound over both. A generation model's KServe infer: refused alike, pointing at
  // the streaming APIs.
  inference::ModelMetadataRequest unknown;
  unknown.set_name("no_such_model");
  inference::ModelMetadataResponse ignored;
  EXPECT_EQ(stub->ModelMetadata(Context().get(), unknown, &ignored).error_code(), grpc::StatusCode::NOT_FOUND);
  auto res = http.Get("/v2/models/no_such_model");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  res = http.Get("/v2/models/llama_tiny/versions/2");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404) << res->body;
  inference::ModelMetadataRequest wrong_version;  // the one hub lookup: the same answer over gRPC
  wrong_version.set_name("llama_tiny");
  wrong_version.set_version("2");
  grpc::Status no_version = stub->ModelMetadata(Context().get(), wrong_version, &ignored);
  EXPECT_EQ(no_version.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(no_version.error_message(), HasSubstr("has no version '2'"));
  EXPECT_THAT(res->body, HasSubstr("has no version '2'"));

  inference::ModelInferRequest infer;
  infer.set_model_name("llama_tiny");
  inference::ModelInferResponse answer;
  grpc::Status refused = stub->ModelInfer(Context().get(), infer, &answer);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("text-generation model"));
  res = http.Post("/v2/models/llama_tiny/infer", R"({"inputs":[]})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_THAT(res->body, HasSubstr("text-generation model"));
}

// /config said priority_levels 0 (the proto's unset value) while priorities 0-3 were taken.
TEST_F(ServerSurfaceTest, ConfigReportsThePriorityLevelsThatAreAccepted) {
  httplib::Client http = Http();
  auto res = http.Get("/v2/models/echo/config");
  ASSERT_TRUE(res);
  const auto config = FromJson<inference::ModelConfig>(res->body);
  const uint64_t levels = config.dynamic_batching().priority_levels();
  EXPECT_EQ(levels, 3u);  // sluice's default
  EXPECT_EQ(config.dynamic_batching().default_priority_level(), 2u);
  auto infer = [&](uint64_t priority) {
    const std::string body = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],)"
                             R"("parameters":{"priority":)" + std::to_string(priority) + "}}";
    auto answer = http.Post("/v2/models/echo/infer", body, "application/json");
    return answer ? answer->status : -1;
  };
  for (uint64_t priority = 0; priority <= levels; ++priority) EXPECT_EQ(infer(priority), 200) << priority;
  EXPECT_EQ(infer(levels + 1), 400);
}

TEST_F(ServerSurfaceTest, CostCoversGenerationModelsAndPerInferenceCostWaitsForAnInference) {
  httplib::Client http = Http();
  auto scrape = [&] {
    auto res = http.Get("/metrics");
    EXPECT_TRUE(res && res->status == 200);
    return res ? res->body : std::string();
  };
  const std::string before = scrape();
  auto s = testing::ParseSamples(before);
  double sum = 0;
  for (const std::string model : kCostedModels) {
    const std::string key = "sluice_cost_usd{model=\"" + model + "\"}";
    ASSERT_EQ(s.count(key), 1u) << key;
    EXPECT_GT(s[key], 0) << key;
    sum += s[key];
  }
  const double total = s["sluice_server_cost_usd{preset=\"\"}"];
  EXPECT_NEAR(total, sum, 1e-9 * total) << "the server's cost is the sum over every model, llama_tiny included";

  // No value before the model's first success (0 would read as "free"); one after.
  const std::string per_1k = "sluice_dollars_per_1k_inferences{model=\"idle\"}";
  EXPECT_EQ(s.count(per_1k), 0u) << "before any inference: " << s[per_1k];
  EXPECT_EQ(s.count("sluice_dollars_per_1k_inferences{model=\"text_embed\"}"), 0u);
  auto res = http.Post("/v2/models/idle/infer",
                       R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}]})",
                       "application/json");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  s = testing::ParseSamples(scrape());
  ASSERT_EQ(s.count(per_1k), 1u);
  EXPECT_NEAR(s[per_1k], s["sluice_cost_usd{model=\"idle\"}"] * 1000, 1e-6 * s[per_1k]);  // one inference
  EXPECT_EQ(s.count("sluice_dollars_per_1k_inferences{model=\"text_embed\"}"), 0u);  // still none there

  // The model's audio-seconds-per-dollar says which audio it counts and names the voice API's figure. (The voice
  // family has no series, so no HELP line, before the first voice call.)
  EXPECT_NE(before.find("# HELP sluice_audio_seconds_per_dollar Model input audio seconds"), std::string::npos);
  EXPECT_NE(before.find("sluice_voice_audio_seconds_per_dollar"), std::string::npos);
}

TEST_F(ServerSurfaceTest, VersionFlagPrintsTheVersionServerMetadataReports) {
  std::FILE* pipe = ::popen(SLUICE_SERVER_BINARY " --version 2>&1", "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << output;
  inference::ServerMetadataResponse metadata;
  ASSERT_TRUE(Stub()->ServerMetadata(Context().get(), {}, &metadata).ok());
  ASSERT_FALSE(metadata.version().empty());
  EXPECT_EQ(output, "sluice-server " + metadata.version() + "\n");
}

}  // namespace
}  // namespace sluice
