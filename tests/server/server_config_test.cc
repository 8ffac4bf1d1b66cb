#include "server/server_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace sluice {
namespace {

using ::testing::HasSubstr;

class ServerConfigTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& text) {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("sluice_server_config_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    path_ = (dir / "server.yaml").string();
    std::ofstream(path_) << text;
    return path_;
  }
  std::string path_;
};

TEST_F(ServerConfigTest, ValidConfigResolvesRepositoryAgainstItsOwnDirectory) {
  const std::string path = Write("grpc: {address: 127.0.0.1:9001}\nmodel_repository: models/\nlog_level: debug\n");
  absl::StatusOr<ServerConfig> config = LoadServerConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->grpc_address, "127.0.0.1:9001");
  EXPECT_EQ(config->http_address, "0.0.0.0:8000");
  EXPECT_EQ(config->model_repository, (std::filesystem::path(path).parent_path() / "models/").string());
  EXPECT_EQ(config->log_level, "debug");
}

TEST_F(ServerConfigTest, ErrorsNameFileKeyAndLine) {
  struct Case {
    std::string text, expected;
  };
  for (const Case& c : std::vector<Case>{
           {"model_repository: m\nhttp: {address: localhost}\n", ":2:17: http.address: 'localhost' is not host:port"},
           {"model_repository: m\ngrpc: {address: 'h:99999'}\n", "grpc.address: 'h:99999' has no valid port"},
           {"model_repository: m\nlog_level: loud\n", ":2:12: log_level: unknown log level 'loud'"},
           {"model_repository: m\nhttp: {adress: x}\n", ":2:8: http.adress: unknown key 'adress'"},
           {"grpc: {address: 0.0.0.0:1}\n", ":1:1: missing required key 'model_repository'"},
           {"model_repository: [a, b]\n", ":1:19: model_repository: expected a string, got a list"},
       }) {
    const std::string path = Write(c.text);
    absl::StatusOr<ServerConfig> config = LoadServerConfig(path);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_THAT(config.status().message(), HasSubstr(path)) << c.text;
    EXPECT_THAT(config.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

}  // namespace
}  // namespace sluice
