// The Server class in-process (no subprocess): listening before the models load, the one request path reached
// through the hub, readiness, and Drain — on a sim-backed repository the test writes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <future>
#include <string>

#include "server/app/server.h"
#include "tests/server/sim_models.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// One HTTP/1.1 GET on a fresh loopback connection; the raw response (status line first).
std::string HttpGet(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "connect failed";
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  ::send(fd, request.data(), request.size(), 0);
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) > 0;) response.append(buffer, n);
  ::close(fd);
  return response;
}

class ServerInProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    repository_ = std::filesystem::temp_directory_path() / ("sluice_inproc_" + std::to_string(::getpid()));
    std::filesystem::remove_all(repository_);
    testing::WriteSimModel(repository_, {.name = "echo", .length = 8, .batch_sizes = "1, 2"});
    config_.grpc_address = "127.0.0.1:0";
    config_.http_address = "127.0.0.1:0";
    config_.model_repository = repository_.string();
  }
  void TearDown() override { std::filesystem::remove_all(repository_); }

  std::filesystem::path repository_;
  ServerConfig config_;
};

TEST_F(ServerInProcessTest, ListensBeforeLoadingServesAfterAndDrains) {
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config_);
  ASSERT_TRUE(server.ok()) << server.status();
  Server& s = **server;
  EXPECT_GT(s.grpc_port(), 0);
  ASSERT_GT(s.http_port(), 0);
  EXPECT_THAT(HttpGet(s.http_port(), "/v2/health/live"), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(HttpGet(s.http_port(), "/v2/health/ready"), StartsWith("HTTP/1.1 503"));
  EXPECT_EQ(s.hub().Find("echo", "").status().code(), absl::StatusCode::kUnavailable);

  ASSERT_TRUE(s.LoadModels().ok());
  EXPECT_THAT(HttpGet(s.http_port(), "/v2/health/ready"), StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(HttpGet(s.http_port(), "/v2/models/echo"), HasSubstr(R"("name":"x","datatype":"FP32","shape":[-1,-1])"));

  absl::StatusOr<ServedModel*> model = s.hub().Find("echo", "1");
  ASSERT_TRUE(model.ok()) << model.status();
  const std::string bytes(3 * sizeof(float), '\0');
  InferCall call;
  call.inputs.push_back({"x", "FP32", {1, 3}, bytes});
  std::promise<absl::StatusOr<InferResult>> answered;
  (*model)->Infer(std::move(call), [&](absl::StatusOr<InferResult> result) { answered.set_value(std::move(result)); });
  absl::StatusOr<InferResult> result = answered.get_future().get();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 1u);
  EXPECT_EQ(result->outputs[0].spec->name, "y");
  EXPECT_EQ(result->outputs[0].tensor.shape[0], 1);

  EXPECT_TRUE(s.Drain(absl::Seconds(5)));
  EXPECT_FALSE(s.hub().ready());
  InferCall late;
  late.inputs.push_back({"x", "FP32", {1, 3}, bytes});
  absl::Status refused;
  (*model)->Infer(std::move(late), [&](absl::StatusOr<InferResult> r) { refused = r.status(); });
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
}

TEST_F(ServerInProcessTest, AMissingRepositoryIsAnErrorNamingItAndTheServerStaysNotReady) {
  config_.model_repository = (repository_ / "nope").string();
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(config_);
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status loaded = (*server)->LoadModels();
  EXPECT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.message(), HasSubstr("nope"));
  EXPECT_FALSE((*server)->hub().ready());
  EXPECT_THAT(HttpGet((*server)->http_port(), "/v2/health/ready"), StartsWith("HTTP/1.1 503"));
}

}  // namespace
}  // namespace sluice
