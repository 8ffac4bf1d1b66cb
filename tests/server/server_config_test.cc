#include "backend/base/server_config.h"

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
  EXPECT_EQ(config->max_message_bytes, 64 << 20);
  EXPECT_TRUE(config->bearer_token.empty());
  EXPECT_TRUE(config->tls_cert_path.empty());
}

// Found by tests/fuzz/fuzz_server_config and fuzz_pricing_yaml: `cost:` took a NaN price (it compares false with
// <= 0) and 4294967296 accelerators (stored as 0).
TEST_F(ServerConfigTest, CostRefusesANanPriceAndACountAnIntCannotHold) {
  absl::StatusOr<ServerConfig> nan =
      LoadServerConfig(Write("model_repository: m\ncost: {hourly_usd: .nan, accelerators: 1, source: x}\n"));
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(std::string(nan.status().message()), HasSubstr("cost.hourly_usd: must be a positive price"));
  absl::StatusOr<ServerConfig> wide =
      LoadServerConfig(Write("model_repository: m\ncost: {hourly_usd: 1, accelerators: 4294967296, source: x}\n"));
  ASSERT_FALSE(wide.ok());
  EXPECT_THAT(std::string(wide.status().message()), HasSubstr("cost.accelerators: must be between 1 and 2147483647"));
}

TEST_F(ServerConfigTest, LimitsKeepaliveTlsAuthAndDrain) {
  const std::string path = Write("model_repository: m\n");
  const auto dir = std::filesystem::path(path).parent_path();
  std::ofstream(dir / "c.pem") << "cert";
  std::ofstream(dir / "k.pem") << "key";
  Write("model_repository: m\nmax_message_bytes: 2048\ngrpc: {address: '127.0.0.1:0', keepalive_time_ms: 2000,"
        " keepalive_timeout_ms: 500}\ntls: {cert: c.pem, key: k.pem}\nauth: {bearer_token: s3cret}\n"
        "drain_grace_seconds: 2.5\n");
  absl::StatusOr<ServerConfig> config = LoadServerConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_message_bytes, 2048);
  EXPECT_EQ(config->keepalive_time_ms, 2000);
  EXPECT_EQ(config->keepalive_timeout_ms, 500);
  EXPECT_EQ(config->tls_cert_path, (dir / "c.pem").string());
  EXPECT_EQ(config->tls_key_path, (dir / "k.pem").string());
  EXPECT_EQ(config->bearer_token, "s3cret");
  EXPECT_DOUBLE_EQ(config->drain_grace_seconds, 2.5);
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
           {"model_repository: m\nmax_message_bytes: 10\n", ":2:20: max_message_bytes: must be between 1024"},
           {"model_repository: m\ngrpc: {address: 'h:1', keepalive_time_ms: 5}\n",
            "grpc.keepalive_time_ms: must be between 1000 and 86400000, got 5"},
           {"model_repository: m\ntls: {cert: nope.pem, key: k.pem}\n", "tls.cert: file '"},
           {"model_repository: m\ntls: {key: k.pem}\n", "missing required key 'cert'"},
           // Found by fuzz_server_config (a 10-minute run): a name the OS refuses (over NAME_MAX) made
           // std::filesystem throw ENAMETOOLONG and ended the process; now an error naming the key.
           {"model_repository: m\ntls: {cert: " + std::string(300, 'x') + ".pem, key: k.pem}\n",
            "tls.cert: file '"},
           {"model_repository: m\nauth: {bearer_token: 'a b'}\n", "auth.bearer_token: must be a non-empty token"},
           {"model_repository: m\ndrain_grace_seconds: -1\n", "drain_grace_seconds: must be between 0 and 3600"},
           {"model_repository: m\nvoice: {default_model: ''}\n", ":2:24: voice.default_model: must name a speech model"},
           {"model_repository: m\nvoice: {stream_idle_timeout_ms: 5}\n",
            "voice.stream_idle_timeout_ms: must be between 100 and 86400000, got 5"},
           {"model_repository: m\nvoice: {decode_threads: 0}\n", "voice.decode_threads: must be between 1 and 256"},
           {"model_repository: m\nvoice: {max_waiting_decodes: -1}\n", "voice.max_waiting_decodes: must be between 0"},
           {"model_repository: m\nvoice: {max_decode_bytes: 10}\n", "voice.max_decode_bytes: must be between 1048576"},
           {"model_repository: m\nvoice: {default: x}\n", "voice.default: unknown key 'default'"},
       }) {
    const std::string path = Write(c.text);
    absl::StatusOr<ServerConfig> config = LoadServerConfig(path);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_THAT(config.status().message(), HasSubstr(path)) << c.text;
    EXPECT_THAT(config.status().message(), HasSubstr(c.expected)) << c.text;
  }
}

TEST_F(ServerConfigTest, TheVoiceSectionChoosesTheDefaultSpeechModelAndTheLimits) {
  absl::StatusOr<ServerConfig> defaults = LoadServerConfig(Write("model_repository: m\n"));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->voice.default_model, "");
  EXPECT_EQ(defaults->voice.stream_idle_timeout_ms, 60000);
  EXPECT_EQ(defaults->voice.decode_threads, 2);
  const std::string path = Write(
      "model_repository: m\nvoice:\n  default_model: asr_digits\n  stream_idle_timeout_ms: 1500\n"
      "  decode_threads: 1\n  max_waiting_decodes: 0\n  max_decode_bytes: 2097152\n");
  absl::StatusOr<ServerConfig> config = LoadServerConfig(path);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->voice.default_model, "asr_digits");
  // Where the key is, for the check against the served models once they have loaded.
  EXPECT_EQ(config->voice.default_model_where, path + ":3:18: voice.default_model: ");
  EXPECT_EQ(config->voice.stream_idle_timeout_ms, 1500);
  EXPECT_EQ(config->voice.decode_threads, 1);
  EXPECT_EQ(config->voice.max_waiting_decodes, 0);
  EXPECT_EQ(config->voice.max_decode_bytes, 2097152);
}

TEST_F(ServerConfigTest, TheExampleConfigLoadsAndNamesTheTrainedRecognizerAsTheRivaDefault) {
  absl::StatusOr<ServerConfig> config = LoadServerConfig(SLUICE_SOURCE_DIR "/deploy/config/example.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->voice.default_model, "asr_digits");
}

}  // namespace
}  // namespace sluice
