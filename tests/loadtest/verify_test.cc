// --verify against the real exported text_embed graphs served by a real sluice-server (CPU), over gRPC and HTTP:
// every reference case matches within 1e-4, so verification passes (the e2e suite checks that it fails on wrong
// outputs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "tests/server/server_process.h"

namespace sluice {
namespace {

// Over gRPC and over HTTP (binary tensor data): the same cases, the same verdict.
TEST(LoadtestVerifyTest, RealModelMatchesItsReferenceSet) {
  testing::ServerProcess server("", {"text_embed"});
  ASSERT_TRUE(server.ready()) << server.Log();
  for (const std::string target : {"-u " + server.grpc_address(), "--protocol http -u " + server.http_address()}) {
    const std::string command = std::string(SLUICE_LOADTEST_BINARY) + " --no-progress " + target +
                                " -m text_embed --verify --model-repository " SLUICE_MODELS_DIR " 2>&1";
    FILE* pipe = ::popen(command.c_str(), "r");
    std::string output;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
    const int status = ::pclose(pipe);
    ASSERT_TRUE(WIFEXITED(status)) << target;
    EXPECT_EQ(WEXITSTATUS(status), 0) << target << "\n" << output;
    EXPECT_THAT(output, ::testing::HasSubstr("verify text_embed: PASS")) << target;
    EXPECT_THAT(output, ::testing::HasSubstr(" 0 mismatched")) << target;
  }
}

}  // namespace
}  // namespace sluice
