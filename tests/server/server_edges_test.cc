// Edges of the real sluice-server process (regression tests for a security review's findings): a second server
// on a port in use exits rather than sharing it; integer inputs outside a model's declared range; priority and
// timeout parameters read as exact integers; unknown and mismatched datatypes named; unusable TLS files stop the
// server before any model loads; gRPC reflection closed without the bearer token and the Bearer scheme matched
// without regard to case; the server listens at once and answers "not ready" while its models load.
// Models are sim models this test writes (no graphs); clients are the generated KServe gRPC stubs and cpp-httplib.
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tests/server/server_process.h"
#include "tests/server/sim_models.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------------------------------
// Models and servers.

// <tmp>/sluice_edges_repo_<pid>/: `echo` (an FP32 input x) and `tokens` (an INT64 input ids, range [0, 999]).
testing::SimRepository& kRepository = testing::AddSimRepository(
    "sluice_edges_repo",
    {{.name = "echo", .length = 8, .batch_sizes = "1, 2"},
     {.name = "tokens", .input = "{name: ids, dtype: INT64, shape: [-1], range: [0, 999]}", .length = 8,
      .batch_sizes = "1, 2"}});

testing::ServerProcess::Options SimServer(const std::string& extra_yaml = "") {
  testing::ServerProcess::Options options;
  options.source_repository = kRepository.path();
  options.extra_yaml = extra_yaml;
  options.start_timeout = std::chrono::seconds(60);
  return options;
}

std::unique_ptr<inference::GRPCInferenceService::Stub> StubFor(const testing::ServerProcess& server) {
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
}

httplib::Client HttpFor(const testing::ServerProcess& server) {
  httplib::Client client("127.0.0.1", server.http_port());
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(10, 0);
  return client;
}

// A context with a deadline (no call here may hang a test) and, if given, an authorization value.
std::unique_ptr<grpc::ClientContext> Context(const std::string& authorization = "") {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  if (!authorization.empty()) context->AddMetadata("authorization", authorization);
  return context;
}

grpc::Status Infer(inference::GRPCInferenceService::Stub& stub, const ModelInferRequest& request,
                   const std::string& authorization = "") {
  ModelInferResponse response;
  return stub.ModelInfer(Context(authorization).get(), request, &response);
}

ModelInferRequest TokenRequest(const std::vector<int64_t>& ids, bool raw) {
  ModelInferRequest request;
  request.set_model_name("tokens");
  auto* input = request.add_inputs();
  input->set_name("ids");
  input->set_datatype("INT64");
  input->add_shape(1);
  input->add_shape(static_cast<int64_t>(ids.size()));
  if (raw) {
    request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8));
  } else {
    for (int64_t id : ids) input->mutable_contents()->add_int64_contents(id);
  }
  return request;
}

std::string TokenJson(const std::vector<int64_t>& ids) {
  std::string data;
  for (int64_t id : ids) data += (data.empty() ? "" : ",") + std::to_string(id);
  return R"({"inputs":[{"name":"ids","datatype":"INT64","shape":[1,)" + std::to_string(ids.size()) +
         R"(],"data":[)" + data + "]}]}";
}

ModelInferRequest EchoRequest(const std::string& datatype = "FP32") {
  ModelInferRequest request;
  request.set_model_name("echo");
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype(datatype);
  input->add_shape(1);
  input->add_shape(4);
  request.add_raw_input_contents(std::string(16, '\0'));
  return request;
}

// An echo infer over HTTP whose JSON ends with `,"parameters":{<parameters>}` when given.
std::string EchoJson(const std::string& parameters = "", const std::string& datatype = "FP32",
                     const std::string& data = "[1,2,3,4]") {
  return R"({"inputs":[{"name":"x","datatype":")" + datatype + R"(","shape":[1,4],"data":)" + data + "}]" +
         (parameters.empty() ? "" : R"(,"parameters":{)" + parameters + "}") + "}";
}

// ---------------------------------------------------------------------------------------------------------------
// A server per test for the request-level findings (a sim server starts in well under a second), so that one
// test's crash never shows up as another's failure.

class EdgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<testing::ServerProcess>(SimServer());
    ASSERT_TRUE(server_->ready()) << server_->Log();
    stub_ = StubFor(*server_);
  }
  void TearDown() override {
    if (server_ == nullptr || server_->http_address().empty()) return;  // SetUp already failed
    EXPECT_TRUE(server_->alive()) << "the server died; exit " << server_->exit_code().value_or(-1) << "\n"
                                  << server_->Log();
    if (server_->alive()) {
      grpc::Status still = Infer(*stub_, EchoRequest());  // still serving
      EXPECT_TRUE(still.ok()) << still.error_message() << "\nserver log:\n" << server_->Log();
    }
  }

  httplib::Result Post(const std::string& model, const std::string& body) {
    return HttpFor(*server_).Post(("/v2/models/" + model + "/infer").c_str(), body, "application/json");
  }

  std::unique_ptr<testing::ServerProcess> server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

// Finding 6: token ids were not checked against the model's vocabulary (an out-of-range id read past an embedding
// table). A declared `range: [0, 999]` now refuses -1, 1000 and INT64_MAX over both front ends.
TEST_F(EdgeTest, IntegerInputsOutsideTheDeclaredRangeAreRefusedOverHttpAndGrpc) {
  for (int64_t id : {int64_t{-1}, int64_t{1000}, std::numeric_limits<int64_t>::max()}) {
    auto res = Post("tokens", TokenJson({5, id}));
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 400) << "id " << id << ": " << res->body;
    EXPECT_THAT(res->body, HasSubstr("outside the model's range [0, 999]")) << "id " << id;
    for (bool raw : {false, true}) {
      grpc::Status status = Infer(*stub_, TokenRequest({5, id}, raw));
      EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << "id " << id << " raw " << raw;
      EXPECT_THAT(status.error_message(), HasSubstr("outside the model's range [0, 999]")) << "id " << id;
    }
  }
  // The bounds themselves are inside.
  auto res = Post("tokens", TokenJson({0, 999}));
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200) << res->body;
  for (bool raw : {false, true}) {
    grpc::Status status = Infer(*stub_, TokenRequest({0, 999}, raw));
    EXPECT_TRUE(status.ok()) << "raw " << raw << ": " << status.error_message();
  }
}

// Finding 7 (parameters): priority 2^32 + 1 was truncated to an int (priority 1, the highest) and a uint64 timeout
// of 2^64 - 1 was read as a negative number. Now both are refused, naming the value; small values still work.
TEST_F(EdgeTest, PriorityAndTimeoutAreReadAsExactIntegers) {
  auto with_priority = [](std::optional<int64_t> as_int64, std::optional<uint64_t> as_uint64) {
    ModelInferRequest request = EchoRequest();
    auto& parameter = (*request.mutable_parameters())["priority"];
    if (as_int64) parameter.set_int64_param(*as_int64);
    if (as_uint64) parameter.set_uint64_param(*as_uint64);
    return request;
  };
  for (const ModelInferRequest& request : {with_priority(4294967297, {}), with_priority({}, 4294967297u)}) {
    grpc::Status status = Infer(*stub_, request);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("4294967297"));
  }
  auto http_priority = Post("echo", EchoJson(R"("priority":4294967297)"));
  ASSERT_TRUE(http_priority) << httplib::to_string(http_priority.error());
  EXPECT_EQ(http_priority->status, 400) << http_priority->body;
  EXPECT_THAT(http_priority->body, HasSubstr("4294967297"));

  ModelInferRequest timeout = EchoRequest();
  (*timeout.mutable_parameters())["timeout"].set_uint64_param(18446744073709551615u);
  grpc::Status status = Infer(*stub_, timeout);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("timeout"));
  EXPECT_THAT(status.error_message(), HasSubstr("18446744073709551615"));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("negative")));
  auto http_timeout = Post("echo", EchoJson(R"("timeout":18446744073709551615)"));
  ASSERT_TRUE(http_timeout) << httplib::to_string(http_timeout.error());
  EXPECT_EQ(http_timeout->status, 400) << http_timeout->body;
  EXPECT_THAT(http_timeout->body, HasSubstr("timeout"));
  EXPECT_THAT(http_timeout->body, HasSubstr("18446744073709551615"));
  EXPECT_THAT(http_timeout->body, Not(HasSubstr("negative")));

  // In range: priority 1 (highest) as either integer type, and a generous timeout, are accepted.
  for (const ModelInferRequest& request : {with_priority(1, {}), with_priority({}, 1u)}) {
    grpc::Status ok = Infer(*stub_, request);
    EXPECT_TRUE(ok.ok()) << ok.error_message();
  }
  auto http_ok = Post("echo", EchoJson(R"("priority":1,"timeout":5000000)"));
  ASSERT_TRUE(http_ok) << httplib::to_string(http_ok.error());
  EXPECT_EQ(http_ok->status, 200) << http_ok->body;
}

// Finding 8 (datatypes): an unknown datatype was reported as a byte-count mismatch. Now it is named, and a known
// datatype that does not match the model's names both.
TEST_F(EdgeTest, UnknownAndMismatchedDatatypesAreNamed) {
  auto unknown = Post("echo", EchoJson("", "FP99"));
  ASSERT_TRUE(unknown) << httplib::to_string(unknown.error());
  EXPECT_EQ(unknown->status, 400);
  EXPECT_THAT(unknown->body, HasSubstr("unknown datatype 'FP99'"));
  grpc::Status unknown_grpc = Infer(*stub_, EchoRequest("FP99"));
  EXPECT_EQ(unknown_grpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown_grpc.error_message(), HasSubstr("unknown datatype 'FP99'"));

  auto bytes = Post("echo", EchoJson("", "BYTES", R"(["a","b","c","d"])"));
  ASSERT_TRUE(bytes) << httplib::to_string(bytes.error());
  EXPECT_EQ(bytes->status, 400);
  EXPECT_THAT(bytes->body, HasSubstr("BYTES"));
  EXPECT_THAT(bytes->body, HasSubstr("FP32"));
  grpc::Status bytes_grpc = Infer(*stub_, EchoRequest("BYTES"));
  EXPECT_EQ(bytes_grpc.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bytes_grpc.error_message(), HasSubstr("BYTES"));
  EXPECT_THAT(bytes_grpc.error_message(), HasSubstr("FP32"));
}

// ---------------------------------------------------------------------------------------------------------------
// Finding 4: gRPC's SO_REUSEPORT let a second server start on a port in use and take a share of its connections;
// the HTTP listener likewise. Now the second server exits non-zero at once, saying why, and the first serves on.

TEST(ListenerTest, ASecondServerOnAPortInUseExitsNonZeroAndTheFirstServesOn) {
  testing::ServerProcess first(SimServer());
  ASSERT_TRUE(first.ready()) << first.Log();
  for (const std::string which : {"grpc", "http"}) {
    testing::ServerProcess::Options options = SimServer();
    (which == "grpc" ? options.grpc_address : options.http_address) =
        which == "grpc" ? first.grpc_address() : first.http_address();
    options.start_timeout = std::chrono::seconds(15);
    const auto start = Clock::now();
    testing::ServerProcess second(options);
    const int code = second.WaitExit(std::chrono::seconds(10));
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
    EXPECT_NE(code, -1000) << which << ": the second server is still running\n" << second.Log();
    EXPECT_NE(code, 0) << which << "\n" << second.Log();
    EXPECT_LT(took, std::chrono::seconds(5)) << which;
    EXPECT_THAT(second.Log(), HasSubstr("address already in use")) << which;
    // One clear line, not gRPC's own account of the failed bind (a screen of internal error text) before it.
    EXPECT_THAT(second.Log(), Not(HasSubstr("No address added"))) << which << "\n" << second.Log();
    EXPECT_THAT(second.Log(), Not(HasSubstr("chttp2_server"))) << which << "\n" << second.Log();
    EXPECT_THAT(second.Log(), Not(HasSubstr("sluice-server READY"))) << which;

    // The first server still answers on both ports, every time (nothing else shares them).
    ASSERT_TRUE(first.alive()) << first.Log();
    auto stub = StubFor(first);
    for (int i = 0; i < 5; ++i) {
      inference::ServerLiveResponse live;
      EXPECT_TRUE(stub->ServerLive(Context().get(), {}, &live).ok()) << which;
      auto res = HttpFor(first).Get("/v2/health/ready");
      ASSERT_TRUE(res) << which << ": " << httplib::to_string(res.error());
      EXPECT_EQ(res->status, 200) << which;
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Finding 8 (TLS): a certificate that is not one, or a key file that is missing, was found only after every model
// had loaded (minutes on real hardware), with a message that did not name the file. Now the server exits non-zero
// before loading anything, naming the file.

TEST(TlsConfigTest, UnusableCertificateOrKeyStopsTheServerBeforeAnyModelLoads) {
  const auto dir = std::filesystem::temp_directory_path() / ("sluice_edges_tls_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string command = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout " +
                              key + " -out " + cert + " 2>/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << "openssl CLI is needed (deploy/install-deps.sh installs it)";
  const std::string garbage = (dir / "garbage-cert.pem").string();
  std::ofstream(garbage) << "not a cert\n";
  const std::string missing_key = (dir / "missing-key.pem").string();

  struct Case {
    std::string cert, key, named;
  };
  for (const Case& c : {Case{garbage, key, garbage}, Case{cert, missing_key, missing_key}}) {
    testing::ServerProcess::Options options = SimServer("tls: {cert: " + c.cert + ", key: " + c.key + "}\n");
    options.start_timeout = std::chrono::seconds(15);
    testing::ServerProcess server(options);
    const int code = server.WaitExit(std::chrono::seconds(10));
    const std::string log = server.Log();
    EXPECT_NE(code, -1000) << c.named << ": still running\n" << log;
    EXPECT_NE(code, 0) << log;
    EXPECT_THAT(log, HasSubstr(c.named));
    EXPECT_THAT(log, Not(HasSubstr("loaded+warmed")));
    EXPECT_THAT(log, Not(HasSubstr("sluice-server READY")));
  }
  std::error_code ignored;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir, ignored);
}

// ---------------------------------------------------------------------------------------------------------------
// Finding 9: gRPC reflection described the whole API to callers without the token, and "authorization: bearer x"
// (lower-case scheme, as HTTP allows) was refused.

struct ReflectionAnswer {
  grpc::Status status;
  std::string reply;  // the first ServerReflectionResponse, serialized
};

// ServerReflectionInfo with one request, list_services: "" (field 7, a string: tag 0x3a, length 0), sent through a
// generic stub so that no reflection descriptor is needed here.
ReflectionAnswer ListServices(const std::string& address, const std::string& authorization) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  std::unique_ptr<grpc::ClientContext> context = Context(authorization);
  grpc::CompletionQueue queue;
  auto next = [&queue] {
    void* tag = nullptr;
    bool ok = false;
    return queue.Next(&tag, &ok) && ok;
  };
  auto call = stub.PrepareCall(context.get(), "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                               &queue);
  ReflectionAnswer answer;
  call->StartCall(reinterpret_cast<void*>(1));
  if (next()) {
    const std::string request("\x3a\x00", 2);
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    call->Write(buffer, reinterpret_cast<void*>(2));
    if (next()) {
      call->WritesDone(reinterpret_cast<void*>(3));
      next();
      grpc::ByteBuffer reply;
      call->Read(&reply, reinterpret_cast<void*>(4));
      if (next()) {
        std::vector<grpc::Slice> slices;
        if (reply.Dump(&slices).ok()) {
          for (const grpc::Slice& s : slices) answer.reply.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
      }
    }
  }
  call->Finish(&answer.status, reinterpret_cast<void*>(5));
  next();
  queue.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (queue.Next(&tag, &ok)) {
  }
  return answer;
}

// The control for the check below: without a token configured, the hand-encoded call does list the services.
TEST(AuthEdgeTest, ReflectionListsTheServicesWhenNoTokenIsConfigured) {
  testing::ServerProcess server(SimServer());
  ASSERT_TRUE(server.ready()) << server.Log();
  const ReflectionAnswer answer = ListServices(server.grpc_address(), "");
  EXPECT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_THAT(answer.reply, HasSubstr("inference.GRPCInferenceService"));
}

TEST(AuthEdgeTest, ReflectionNeedsTheTokenAndTheBearerSchemeIgnoresCase) {
  testing::ServerProcess server(SimServer("auth: {bearer_token: s3cret}\n"));
  ASSERT_TRUE(server.ready()) << server.Log();
  const ReflectionAnswer anonymous = ListServices(server.grpc_address(), "");
  EXPECT_TRUE(!anonymous.status.ok() || anonymous.reply.find("inference.GRPCInferenceService") == std::string::npos)
      << "reflection listed the services to a caller without the token";
  EXPECT_THAT(anonymous.reply, Not(HasSubstr("GRPCInferenceService")));

  auto stub = StubFor(server);
  for (const std::string good : {"Bearer s3cret", "bearer s3cret", "BEARER s3cret"}) {
    inference::ServerMetadataResponse metadata;
    grpc::Status status = stub->ServerMetadata(Context(good).get(), {}, &metadata);
    EXPECT_TRUE(status.ok()) << "'" << good << "': " << status.error_message();
    EXPECT_TRUE(Infer(*stub, EchoRequest(), good).ok()) << "'" << good << "'";
  }
  for (const std::string bad : {"", "Bearer wrong", "bearer wrong", "Basic s3cret", "s3cret"}) {
    inference::ServerMetadataResponse metadata;
    EXPECT_EQ(stub->ServerMetadata(Context(bad).get(), {}, &metadata).error_code(),
              grpc::StatusCode::UNAUTHENTICATED) << "'" << bad << "'";
    EXPECT_EQ(Infer(*stub, EchoRequest(), bad).error_code(), grpc::StatusCode::UNAUTHENTICATED) << "'" << bad << "'";
  }

  httplib::Client client = HttpFor(server);
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"Authorization", "Bearer s3cret"}, {"authorization", "bearer s3cret"}, {"Authorization", "BEARER s3cret"}}) {
    auto res = client.Get("/v2/models/echo", {{name, value}});
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 200) << name << ": " << value << ": " << res->body;
    auto infer = client.Post("/v2/models/echo/infer", {{name, value}}, EchoJson(), "application/json");
    ASSERT_TRUE(infer) << httplib::to_string(infer.error());
    EXPECT_EQ(infer->status, 200) << name << ": " << value << ": " << infer->body;
  }
  for (const std::string bad : {"Bearer wrong", "bearer wrong", "Basic s3cret"}) {
    auto res = client.Get("/v2/models/echo", {{"Authorization", bad}});
    ASSERT_TRUE(res) << httplib::to_string(res.error());
    EXPECT_EQ(res->status, 401) << bad;
  }
  auto missing = client.Get("/v2/models/echo");
  ASSERT_TRUE(missing) << httplib::to_string(missing.error());
  EXPECT_EQ(missing->status, 401);
}

// ---------------------------------------------------------------------------------------------------------------
// Finding 10: the server opened its ports only after every model had loaded (minutes on real hardware): probes saw
// "connection refused" and restarted it. Now it listens first and answers "live, not ready" while loading.
// The model's config.yaml is a FIFO: the server's load blocks on reading it until the test writes the config, so
// the loading phase lasts exactly as long as the test needs (no guessing at load times).

TEST(LoadingTest, ListensAtOnceAndAnswersNotReadyUntilTheModelsAreLoaded) {
  const auto repository =
      std::filesystem::temp_directory_path() / ("sluice_edges_loading_repo_" + std::to_string(::getpid()));
  std::filesystem::remove_all(repository);
  std::filesystem::create_directories(repository / "late");
  const std::string fifo = (repository / "late" / "config.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);

  testing::ServerProcess::Options options;
  options.source_repository = repository.string();
  options.return_when_listening = true;
  options.start_timeout = std::chrono::seconds(20);
  testing::ServerProcess server(options);
  ASSERT_TRUE(server.ready()) << "no LISTENING line before the models loaded\n" << server.Log();
  ASSERT_THAT(server.Log(), Not(HasSubstr("sluice-server READY")));

  httplib::Client client = HttpFor(server);
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);
  ModelInferRequest request = EchoRequest();
  request.set_model_name("late");
  const std::string json = EchoJson();

  {  // Loading: live, not ready, inference refused as unavailable.
    auto live = client.Get("/v2/health/live");
    ASSERT_TRUE(live) << httplib::to_string(live.error());
    EXPECT_EQ(live->status, 200);
    auto ready = client.Get("/v2/health/ready");
    ASSERT_TRUE(ready) << httplib::to_string(ready.error());
    EXPECT_EQ(ready->status, 503);
    auto infer = client.Post("/v2/models/late/infer", json, "application/json");
    ASSERT_TRUE(infer) << httplib::to_string(infer.error());
    EXPECT_EQ(infer->status, 503) << infer->body;
    EXPECT_THAT(infer->body, HasSubstr("loading"));
    // The OpenAI model list says "not ready" too, rather than an empty list ("no models here").
    auto models = client.Get("/v1/models");
    ASSERT_TRUE(models) << httplib::to_string(models.error());
    EXPECT_EQ(models->status, 503) << models->body;
    EXPECT_THAT(models->body, HasSubstr("loading"));

    inference::ServerLiveResponse grpc_live;
    grpc::Status live_status = stub->ServerLive(Context().get(), {}, &grpc_live);
    EXPECT_TRUE(live_status.ok()) << live_status.error_message();
    EXPECT_TRUE(grpc_live.live());
    inference::ServerReadyResponse grpc_ready;
    grpc::Status ready_status = stub->ServerReady(Context().get(), {}, &grpc_ready);
    EXPECT_TRUE(ready_status.error_code() == grpc::StatusCode::UNAVAILABLE || (ready_status.ok() && !grpc_ready.ready()))
        << ready_status.error_message();
    grpc::health::v1::HealthCheckResponse check;
    grpc::Status check_status = health->Check(Context().get(), {}, &check);
    EXPECT_TRUE(check_status.ok()) << check_status.error_message();
    EXPECT_EQ(check.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
    grpc::Status refused = Infer(*stub, request);
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
    EXPECT_THAT(refused.error_message(), HasSubstr("loading"));
  }
  ASSERT_TRUE(server.alive());
  ASSERT_THAT(server.Log(), Not(HasSubstr("sluice-server READY")));  // all of the above was during the load

  // Let the load finish: the server is blocked opening (or reading) the FIFO; give it the config.
  int fd = -1;
  for (const auto until = Clock::now() + std::chrono::seconds(10); fd < 0 && Clock::now() < until;) {
    fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);  // ENXIO until the server opens it for reading
    if (fd < 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(fd, 0) << "the server never opened the model's config.yaml\n" << server.Log();
  const std::string text = testing::SimModelConfig({.name = "late", .length = 8, .max_queue_size = 8});
  ASSERT_EQ(::write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  ::close(fd);
  ASSERT_TRUE(server.WaitForReady(std::chrono::seconds(20))) << server.Log();

  // Ready: everything serves.
  auto ready = client.Get("/v2/health/ready");
  ASSERT_TRUE(ready) << httplib::to_string(ready.error());
  EXPECT_EQ(ready->status, 200);
  auto infer = client.Post("/v2/models/late/infer", json, "application/json");
  ASSERT_TRUE(infer) << httplib::to_string(infer.error()) << "\nserver log:\n" << server.Log();
  EXPECT_EQ(infer->status, 200) << infer->body;
  inference::ServerReadyResponse grpc_ready;
  ASSERT_TRUE(stub->ServerReady(Context().get(), {}, &grpc_ready).ok());
  EXPECT_TRUE(grpc_ready.ready());
  grpc::health::v1::HealthCheckResponse check;
  ASSERT_TRUE(health->Check(Context().get(), {}, &check).ok());
  EXPECT_EQ(check.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  grpc::Status served = Infer(*stub, request);
  EXPECT_TRUE(served.ok()) << served.error_message();

  std::error_code ignored;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(repository, ignored);
}

// A load that cannot stop (blocked reading a config): the server waits its bound (5 s, server_main.cc
// kStopLoadingTimeout) for the load to stop, then exits 0 without it. A load that stops is shown by
// NrtServerTest.SigtermDuringLoadingUnloadsWhatWasLoadedAndClosesTheRuntime.
TEST(LoadingTest, SigtermWhileLoadingExitsWithZeroWithinTheBound) {
  const auto repository =
      std::filesystem::temp_directory_path() / ("sluice_edges_sigterm_repo_" + std::to_string(::getpid()));
  std::filesystem::remove_all(repository);
  std::filesystem::create_directories(repository / "late");
  const std::string fifo = (repository / "late" / "config.yaml").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);  // never written: loading never ends

  testing::ServerProcess::Options options;
  options.source_repository = repository.string();
  options.return_when_listening = true;
  options.start_timeout = std::chrono::seconds(20);
  testing::ServerProcess server(options);
  ASSERT_TRUE(server.ready()) << server.Log();
  const auto signalled = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(15)), 0) << server.Log();
  std::printf("[ timing ] exited %.1f s after SIGTERM\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count());
  EXPECT_THAT(server.Log(), HasSubstr("while loading models"));
  EXPECT_THAT(server.Log(), HasSubstr("loading did not stop within 5 s"));
  EXPECT_THAT(server.Log(), Not(HasSubstr("sluice-server READY")));

  std::error_code ignored;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(repository, ignored);
}

}  // namespace
}  // namespace sluice
