// sluice-loadtest --api openai --verify against the real example generation model llama_tiny (exported by
// backend/compile/llama_export.py with reference_generation.json: greedy batch-1 eager decoding): every reference
// case is sent greedily and its streamed text compared token by token with the reference ids (decoded with the
// model's tokenizer); a case must match exactly. And the check itself can fail: a reference file with one token
// changed is reported as a mismatch at that token, with exit code 1.
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

  static Result Verify(const std::string& repository, const std::string& json) {
    return Shell(std::string(SLUICE_LOADTEST_BINARY) + " --no-progress --api openai -m llama_tiny -u " +
                 server_->http_address() + " --verify --model-repository " + repository + " --json " + json);
  }

  static inline testing::ServerProcess* server_ = nullptr;
};

TEST_F(GenerationVerifyTest, EveryReferenceCaseMatchesTokenForToken) {
  const std::string json = (server_->dir() / "verify.json").string();
  Result r = Verify(SLUICE_MODELS_DIR, json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(json);
  rapidjson::Document doc;
  doc.Parse(std::string((std::istreambuf_iterator<char>(in)), {}).c_str());
  const rapidjson::Value* cases = rapidjson::Pointer("/verify/0/cases").Get(doc);
  ASSERT_NE(cases, nullptr) << r.output;
  EXPECT_GE(cases->GetInt(), 4);
  EXPECT_EQ(rapidjson::Pointer("/verify/0/mismatched_cases").Get(doc)->GetInt(), 0) << r.output;
}

TEST_F(GenerationVerifyTest, AChangedReferenceTokenIsCaught) {
  // A copy of the repository's llama_tiny files the client reads, with token 5 of case 0 changed.
  const std::filesystem::path copy = server_->dir() / "corrupted";
  std::filesystem::create_directories(copy / "llama_tiny");
  const std::filesystem::path source = std::filesystem::path(SLUICE_MODELS_DIR) / "llama_tiny";
  std::filesystem::copy_file(source / "tokenizer.model", copy / "llama_tiny" / "tokenizer.model");
  std::ifstream in(source / "reference_generation.json");
  rapidjson::Document doc;
  doc.Parse(std::string((std::istreambuf_iterator<char>(in)), {}).c_str());
  ASSERT_FALSE(doc.HasParseError());
  rapidjson::Value& token = doc["cases"][0]["output_ids"][5];
  token.SetInt((token.GetInt() + 7) % 1000 + 100);
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> writer(buffer);
  doc.Accept(writer);
  std::ofstream(copy / "llama_tiny" / "reference_generation.json") << buffer.GetString();

  Result r = Verify(copy.string(), (server_->dir() / "corrupted.json").string());
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("case 0: first mismatch at output token"));
}

}  // namespace
}  // namespace sluice
