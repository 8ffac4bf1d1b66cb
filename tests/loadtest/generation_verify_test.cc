// sluice-loadtest --verify against the real example generation model llama_tiny (exported by
// backend/compile/llama_export.py with reference_generation.json: greedy batch-1 eager decoding), over both
// generation APIs: --api openai (the prompt as token ids, over HTTP) and --api triton-stream (the prompt as text,
// over gRPC ModelStreamInfer). Every reference case is sent greedily and its streamed text compared token by token
// with the reference ids (decoded with the model's tokenizer); a case must match exactly. And the check itself can
// fail: a reference file with one token changed is reported as a mismatch at that token, with exit code 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

struct Result {
  int exit_code = -1;
  std::string output;
};

Result Shell(const std::string& command) {
  Result result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class GenerationVerifyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess("", {"llama_tiny"});
    ASSERT_TRUE(server_->ready()) << server_->Log();
  }
  static void TearDownTestSuite() { delete server_; }
  void SetUp() override { ASSERT_NE(server_, nullptr); }

  static Result Verify(const std::string& repository, const std::string& json, const std::string& api = "openai") {
    const std::string& address = api == "openai" ? server_->http_address() : server_->grpc_address();
    return Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api " + api + " -m llama_tiny -u " + address +
                 " --verify --model-repository " + repository + " --json " + json);
  }

  // A copy of the repository's llama_tiny files the client reads, with token 5 of case 0 changed.
  static std::filesystem::path CorruptedCopy(const std::string& name) {
    const std::filesystem::path copy = server_->dir() / name;
    std::filesystem::create_directories(copy / "llama_tiny");
    const std::filesystem::path source = std::filesystem::path(SLUICE_MODELS_DIR) / "llama_tiny";
    std::filesystem::copy_file(source / "tokenizer.model", copy / "llama_tiny" / "tokenizer.model");
    std::filesystem::copy_file(source / "config.yaml", copy / "llama_tiny" / "config.yaml");
    std::ifstream in(source / "reference_generation.json");
    rapidjson::Document doc;
    doc.Parse(std::string((std::istreambuf_iterator<char>(in)), {}).c_str());
    EXPECT_FALSE(doc.HasParseError());
    rapidjson::Value& token = doc["cases"][0]["output_ids"][5];
    token.SetInt((token.GetInt() + 7) % 1000 + 100);
    rapidjson::StringBuffer buffer;
    rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
    doc.Accept(writer);
    std::ofstream(copy / "llama_tiny" / "reference_generation.json") << buffer.GetString();
    return copy;
  }

  static void ExpectAllCasesMatch(const std::string& api) {
    const std::string json = (server_->dir() / ("verify_" + api + ".json")).string();
    Result r = Verify(SLUICE_MODELS_DIR, json, api);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ifstream in(json);
    rapidjson::Document doc;
    doc.Parse(std::string((std::istreambuf_iterator<char>(in)), {}).c_str());
    const rapidjson::Value* cases = rapidjson::Pointer("/verify/0/cases").Get(doc);
    ASSERT_NE(cases, nullptr) << r.output;
    EXPECT_EQ(cases->GetInt(), 13);  // every case of the reference set
    EXPECT_EQ(rapidjson::Pointer("/verify/0/mismatched_cases").Get(doc)->GetInt(), 0) << r.output;
    EXPECT_EQ(rapidjson::Pointer("/verify/0/failed_calls").Get(doc)->GetInt(), 0) << r.output;
  }

  static inline testing::ServerProcess* server_ = nullptr;
};

TEST_F(GenerationVerifyTest, EveryReferenceCaseMatchesTokenForToken) { ExpectAllCasesMatch("openai"); }

TEST_F(GenerationVerifyTest, EveryReferenceCaseMatchesTokenForTokenOverTritonStream) {
  ExpectAllCasesMatch("triton-stream");
}

TEST_F(GenerationVerifyTest, AChangedReferenceTokenIsCaught) {
  for (const std::string api : {"openai", "triton-stream"}) {
    const std::filesystem::path copy = CorruptedCopy("corrupted_" + api);
    Result r = Verify(copy.string(), (server_->dir() / ("corrupted_" + api + ".json")).string(), api);
    EXPECT_EQ(r.exit_code, 1) << api << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr("case 0: first mismatch at output token")) << api;
  }
}

}  // namespace
}  // namespace sluice
