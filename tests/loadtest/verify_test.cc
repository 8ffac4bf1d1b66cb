// --verify against the real exported text_embed graphs served by a real sluice-server (CPU): every reference
// case matches within 1e-4, so verification passes (the e2e suite checks that it fails on wrong outputs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "tests/server/server_process.h"

namespace sluice {
namespace {

TEST(LoadtestVerifyTest, RealModelMatchesItsReferenceSet) {
  testing::ServerProcess server("", {"text_embed"});
  ASSERT_TRUE(server.ready()) << server.Log();
  const std::string command = std::string(SLUICE_LOADTEST_BINARY) + " --no-progress -u " + server.grpc_address() +
                              " -m text_embed --verify --model-repository " SLUICE_MODELS_DIR " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = ::pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_THAT(output, ::testing::HasSubstr("verify text_embed: PASS"));
  EXPECT_THAT(output, ::testing::HasSubstr(" 0 mismatched"));
}

}  // namespace
}  // namespace sluice
