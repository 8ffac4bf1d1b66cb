// Queue policy through the front ends of the real sluice-server, on a sim-backed model this test writes (no graph
// files; every batch takes kBatchMs, one instance, batch size 1, max_queue_size 2): a full queue answers
// RESOURCE_EXHAUSTED over gRPC and 429 + Retry-After over HTTP; a gRPC deadline on a long queue ends in
// DEADLINE_EXCEEDED and the request never runs (its queue slot is freed at once); Triton's `timeout` parameter
// expires a queued request server-side (gRPC and HTTP); a cancelled gRPC call withdraws its queued request; SIGTERM
// drains over gRPC and over HTTP (health NOT_SERVING / ready 503, new calls UNAVAILABLE / 503, every accepted
// request answered in full, exit 0).
// Timelines leave hundreds of milliseconds between the steps they rely on, so a busy machine does not change them.
#include <gmock/gmock.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <optional>

#include "grpc_service.grpc.pb.h"
#include "health.grpc.pb.h"
#include "tests/server/server_process.h"
#include "tests/server/sim_models.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using std::chrono::milliseconds;

constexpr int kBatchMs = 2000;  // how long the sim instance takes for every batch of `slow`
constexpr milliseconds kStep(500);  // between the steps of a timeline: far above scheduling noise on a busy machine

// <tmp>/sluice_queue_repo_<pid>/: `slow` (one instance, batch size 1, every batch kBatchMs, a queue of 2) and
// `drain` (batches of 1 or 4 taking 1 s, a queue of 64).
std::string WriteSimRepository() {
  const auto dir = std::filesystem::temp_directory_path() / ("sluice_queue_repo_" + std::to_string(::getpid()));
  testing::WriteSimModel(dir, {.name = "slow", .max_queue_size = 2, .base_ms = kBatchMs});
  testing::WriteSimModel(dir, {.name = "drain", .batch_sizes = "1, 4", .max_queue_size = 64, .base_ms = 1000});
  return dir.string();
}

ModelInferRequest SlowRequest(std::optional<int64_t> timeout_us = std::nullopt, const std::string& model = "slow") {
  ModelInferRequest request;
  request.set_model_name(model);
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(4);
  request.add_raw_input_contents(std::string(16, '\0'));
  if (timeout_us) (*request.mutable_parameters())["timeout"].set_int64_param(*timeout_us);
  return request;
}

// One ModelInfer on its own thread; the context stays reachable so the test can cancel the call.
struct Call {
  grpc::ClientContext context;
  ModelInferRequest request;
  ModelInferResponse response;
  std::future<grpc::Status> status;
};

std::unique_ptr<Call> StartCall(inference::GRPCInferenceService::Stub* stub, ModelInferRequest request,
                                milliseconds deadline = milliseconds(60000)) {
  auto call = std::make_unique<Call>();
  call->request = std::move(request);
  call->context.set_deadline(std::chrono::system_clock::now() + deadline);
  Call* c = call.get();
  c->status = std::async(std::launch::async, [stub, c] { return stub->ModelInfer(&c->context, c->request, &c->response); });
  return call;
}

// "draining N accepted request(s)" from the server log: the requests in flight when SIGTERM came.
int DrainedCount(const std::string& log) {
  const size_t at = log.find("draining ");
  return at == std::string::npos ? -1 : std::stoi(log.substr(at + 9));
}

struct Counts {
  uint64_t succeeded = 0, failed = 0;
};

class FrontendQueueTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = new std::string(WriteSimRepository());
    server_ = new testing::ServerProcess("", {}, *repository_);
    ASSERT_TRUE(server_->ready()) << server_->Log();
    stub_ = inference::GRPCInferenceService::NewStub(
                grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()))
                .release();
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete server_;
    delete repository_;
  }

  static Counts Stats() {
    grpc::ClientContext context;
    inference::ModelStatisticsRequest request;
    request.set_name("slow");
    inference::ModelStatisticsResponse response;
    EXPECT_TRUE(stub_->ModelStatistics(&context, request, &response).ok());
    if (response.model_stats_size() != 1) return {};
    return {response.model_stats(0).inference_count(), response.model_stats(0).inference_stats().fail().count()};
  }

  // Starts one call that occupies the instance, then `queued` calls that fill the queue behind it.
  static std::vector<std::unique_ptr<Call>> Occupy(int queued, std::optional<milliseconds> first_queued_deadline = {}) {
    std::vector<std::unique_ptr<Call>> calls;
    calls.push_back(StartCall(stub_, SlowRequest()));
    std::this_thread::sleep_for(kStep);  // taken off the queue by the instance
    for (int i = 0; i < queued; ++i) {
      calls.push_back(i == 0 && first_queued_deadline ? StartCall(stub_, SlowRequest(), *first_queued_deadline)
                                                      : StartCall(stub_, SlowRequest()));
    }
    if (queued > 0) std::this_thread::sleep_for(kStep);  // queued
    return calls;
  }

  // After call B (calls[1]) left the full queue: a new call D is accepted, A, C and D succeed, and the
  // statistics show 3 successes and 1 failure since `before` (B never ran).
  static void ExpectSlotFreedAndBNeverRan(std::vector<std::unique_ptr<Call>>& calls, const Counts& before) {
    std::this_thread::sleep_for(milliseconds(200));
    calls.push_back(StartCall(stub_, SlowRequest()));
    for (size_t i : {0, 2, 3}) {
      grpc::Status status = calls[i]->status.get();
      EXPECT_TRUE(status.ok()) << "call " << i << ": " << status.error_message();
    }
    const Counts after = Stats();
    EXPECT_EQ(after.succeeded - before.succeeded, 3u);
    EXPECT_EQ(after.failed - before.failed, 1u);
  }

  static inline std::string* repository_ = nullptr;
  static inline testing::ServerProcess* server_ = nullptr;
  static inline inference::GRPCInferenceService::Stub* stub_ = nullptr;
};

TEST_F(FrontendQueueTest, FullQueueIsResourceExhaustedOverGrpcAnd429OverHttp) {
  std::vector<std::unique_ptr<Call>> calls = Occupy(2);  // 1 running + 2 queued = max_queue_size reached
  ModelInferResponse response;
  grpc::ClientContext context;
  grpc::Status refused = stub_->ModelInfer(&context, SlowRequest(), &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("queue is full (max_queue_size 2)"));

  httplib::Client client("127.0.0.1", server_->http_port());
  client.set_read_timeout(30, 0);
  auto res = client.Post("/v2/models/slow/infer",
                         R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[0.5,0.25]}]})",
                         "application/json");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 429);
  EXPECT_EQ(res->get_header_value("Retry-After"), "1");
  EXPECT_THAT(res->body, HasSubstr(R"j({"error":"model slow queue is full (max_queue_size 2)"})j"));
  for (auto& call : calls) EXPECT_TRUE(call->status.get().ok());  // everything accepted is answered
}

TEST_F(FrontendQueueTest, GrpcDeadlineBecomesTheRequestDeadline) {
  const Counts before = Stats();
  // t=0: A runs until t=2000. t=500: B (deadline 600 ms) and C queue; the queue is full.
  std::vector<std::unique_ptr<Call>> calls = Occupy(2, milliseconds(600));
  grpc::Status expired = calls[1]->status.get();  // t≈1100
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << expired.error_message();
  // B left the queue when its deadline passed: a new call is accepted while A still runs (t≈1300 < 2000).
  ExpectSlotFreedAndBNeverRan(calls, before);
}

TEST_F(FrontendQueueTest, TimeoutParameterExpiresQueuedRequestsServerSide) {
  // t=0: A runs until t=2000. t=500: B (gRPC) and an HTTP request queue with a 500-ms timeout each.
  std::vector<std::unique_ptr<Call>> calls = Occupy(0);
  // No client deadline: DEADLINE_EXCEEDED can only come from the server's scheduler.
  calls.push_back(StartCall(stub_, SlowRequest(/*timeout_us=*/500000)));
  auto http = std::async(std::launch::async, [] {
    httplib::Client client("127.0.0.1", server_->http_port());
    client.set_read_timeout(30, 0);
    return client.Post("/v2/models/slow/infer",
                       R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,2],"data":[1,2]}],)"
                       R"("parameters":{"timeout":500000}})",
                       "application/json");
  });
  grpc::Status expired = calls[1]->status.get();
  EXPECT_EQ(expired.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << expired.error_message();
  EXPECT_THAT(expired.error_message(), HasSubstr("deadline passed while queued"));
  auto res = http.get();
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 504);
  EXPECT_THAT(res->body, HasSubstr("deadline passed while queued"));
  EXPECT_TRUE(calls[0]->status.get().ok());
}

TEST_F(FrontendQueueTest, CancelledGrpcCallWithdrawsItsQueuedRequest) {
  const Counts before = Stats();
  // t=0: A runs until t=2000. t=500: B and C queue; the queue is full. t=1000: B is cancelled.
  std::vector<std::unique_ptr<Call>> calls = Occupy(2);
  calls[1]->context.TryCancel();
  EXPECT_EQ(calls[1]->status.get().error_code(), grpc::StatusCode::CANCELLED);
  // The server withdrew B: a new call is accepted while A still runs (t≈1200 < 2000).
  ExpectSlotFreedAndBNeverRan(calls, before);
}

TEST(FrontendDrainTest, SigtermDrainsOverGrpc) {
  testing::ServerProcess server("drain_grace_seconds: 30\n", {}, WriteSimRepository());
  ASSERT_TRUE(server.ready()) << server.Log();
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = inference::GRPCInferenceService::NewStub(channel);
  auto health = grpc::health::v1::Health::NewStub(channel);
  // t=0: the first call runs until t=1000; the other five queue behind it (then run as batches of 4 and 1).
  std::vector<std::unique_ptr<Call>> calls;
  for (int i = 0; i < 6; ++i) {
    calls.push_back(StartCall(stub.get(), SlowRequest(std::nullopt, "drain")));
    if (i == 0) std::this_thread::sleep_for(milliseconds(50));
  }
  std::this_thread::sleep_for(milliseconds(300));
  server.Signal(SIGTERM);

  grpc::health::v1::HealthCheckResponse status;  // not serving at once
  for (int i = 0; i < 100; ++i) {
    grpc::ClientContext context;
    ASSERT_TRUE(health->Check(&context, {}, &status).ok());
    if (status.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING) break;
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  grpc::ClientContext ready_context;
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(stub->ServerReady(&ready_context, {}, &ready).ok());
  EXPECT_FALSE(ready.ready());
  grpc::ClientContext late_context;
  ModelInferResponse late;
  grpc::Status refused = stub->ModelInfer(&late_context, SlowRequest(std::nullopt, "drain"), &late);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::UNAVAILABLE) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("draining"));

  // Every call accepted before SIGTERM is answered in full; one not yet accepted then (only on a stalled
  // machine: they had 300 ms) is refused as draining. Nothing fails any other way.
  int ok = 0;
  for (auto& call : calls) {
    grpc::Status s = call->status.get();
    if (s.ok()) {
      ++ok;
      EXPECT_EQ(call->response.outputs_size(), 1);
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    }
  }
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(30)), 0) << server.Log();
  const int accepted = DrainedCount(server.Log());
  EXPECT_GE(accepted, 1) << server.Log();  // the first call runs for 1 s: it is in flight at SIGTERM
  EXPECT_GE(ok, accepted) << server.Log();
  EXPECT_THAT(server.Log(), HasSubstr("drain complete"));
}

// The same over HTTP, with bodies in the binary-data form. Replaces a drain test on asr_ctc whose count of
// requests in flight at SIGTERM depended on how fast the machine ran the model (a flake).
TEST(FrontendDrainTest, SigtermDrainsOverHttp) {
  testing::ServerProcess server("drain_grace_seconds: 30\n", {}, WriteSimRepository());
  ASSERT_TRUE(server.ready()) << server.Log();
  const std::string header = R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,16],)"
                             R"("parameters":{"binary_data_size":64}}]})";
  const std::string body = header + std::string(64, '\0');
  const httplib::Headers headers{{"Inference-Header-Content-Length", std::to_string(header.size())}};
  auto post = [&] {
    httplib::Client client("127.0.0.1", server.http_port());
    client.set_read_timeout(60, 0);
    auto res = client.Post("/v2/models/drain/infer", headers, body, "application/octet-stream");
    if (!res) return std::make_pair(-1, httplib::to_string(res.error()));
    return std::make_pair(res->status, res->body);
  };
  constexpr int kRequests = 6;
  std::vector<std::future<std::pair<int, std::string>>> answers;
  for (int i = 0; i < kRequests; ++i) {
    answers.push_back(std::async(std::launch::async, post));
    if (i == 0) std::this_thread::sleep_for(milliseconds(50));
  }
  std::this_thread::sleep_for(milliseconds(300));
  server.Signal(SIGTERM);
  httplib::Client late("127.0.0.1", server.http_port());
  late.set_read_timeout(30, 0);
  std::optional<std::string> ready_body;
  for (int i = 0; i < 100; ++i) {  // not ready at once
    auto ready = late.Get("/v2/health/ready");
    ASSERT_TRUE(ready) << httplib::to_string(ready.error());
    if (ready->status == 503) {
      ready_body = ready->body;
      break;
    }
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_TRUE(ready_body.has_value());
  auto refused = late.Post("/v2/models/drain/infer", headers, body, "application/octet-stream");
  ASSERT_TRUE(refused) << httplib::to_string(refused.error());
  EXPECT_EQ(refused->status, 503);
  EXPECT_THAT(refused->body, HasSubstr("draining"));
  int ok = 0;
  for (auto& answer : answers) {  // answered in full, or (not yet accepted at SIGTERM) refused as draining
    const auto [status, text] = answer.get();
    if (status == 200) {
      ++ok;
      EXPECT_THAT(text, HasSubstr(R"("name":"y")"));
    } else {
      EXPECT_EQ(status, 503) << text;
      EXPECT_THAT(text, HasSubstr("draining"));
    }
  }
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(30)), 0) << server.Log();
  const int accepted = DrainedCount(server.Log());
  EXPECT_GE(accepted, 1) << server.Log();
  EXPECT_GE(ok, accepted) << server.Log();
  EXPECT_THAT(server.Log(), HasSubstr("drain complete"));
}

}  // namespace
}  // namespace sluice
