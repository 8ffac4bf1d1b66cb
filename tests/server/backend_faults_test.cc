// Backend faults stay contained, end to end: the real sluice-server on sim models that inject faults
// (model_config.h SimFaults) — failing batches, a backend that throws, devices that disappear. Each fault fails
// only the requests of its batch, with a message naming model, bucket and instance; the process keeps serving;
// an instance whose device is gone leaves rotation, and a model with none left reports not ready; a hung execution
// is answered at the model's execution_timeout_ms, its instance leaves rotation, and the server still drains to
// exit 0 (its own server: the hung instance's thread never returns).
#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/server/server_process.h"
#include "tests/server/sim_models.h"

namespace sluice {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::ServerProcess;

std::string SimConfig(const std::string& name, int instances, const std::string& faults,
                      const std::string& extra_batching = "") {
  return "name: " + name + "\nkind: generic\n"
         "inputs:\n  - {name: x, dtype: FP32, shape: [-1]}\n"
         "outputs:\n  - {name: y, dtype: FP32, shape: [-1]}\n"
         "buckets: {lengths: [16], batch_sizes: [1]}\n"
         "batching: {max_queue_delay_ms: 0, max_queue_size: 64" + extra_batching + "}\n"
         "instances: [{count: " + std::to_string(instances) + ", device: sim}]\n"
         "sim: {base_ms: 1, per_sample_us: 0, faults: " + faults + "}\n";
}

testing::SimRepository& repository = testing::AddConfigRepository(
    "faults", {{"flaky", SimConfig("flaky", 1, "{error_rate: 0.2, exception_rate: 0.2, seed: 7}")},
               {"vanishing", SimConfig("vanishing", 2, "{gone_after_batches: 3}")}});
// Instance 0 hangs (for an hour) from its third batch on; instance 1 is healthy.
testing::SimRepository& hanging_repository = testing::AddConfigRepository(
    "hanging", {{"hanging", SimConfig("hanging", 2, "{hang_after_batches: 2, replica: 0}",
                                      ", execution_timeout_ms: 300")}});

// One request of 4 zeros to `model` (length 4 of bucket 16), 20 s deadline.
grpc::Status InferOne(inference::GRPCInferenceService::Stub& stub, const std::string& model) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* input = request.add_inputs();
  input->set_name("x");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(4);
  request.add_raw_input_contents(std::string(16, '\0'));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  inference::ModelInferResponse response;
  return stub.ModelInfer(&context, request, &response);
}

class BackendFaultsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess("", {}, repository.path()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->ready()) << server_->Log();
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
  }

  grpc::Status Infer(const std::string& model) { return InferOne(*stub_, model); }

  bool Ready(const std::string& model) {
    grpc::ClientContext context;
    inference::ModelReadyRequest request;
    request.set_name(model);
    inference::ModelReadyResponse response;
    EXPECT_TRUE(stub_->ModelReady(&context, request, &response).ok());
    return response.ready();
  }

  std::string Metrics() {
    httplib::Client http("127.0.0.1", server_->http_port());
    auto result = http.Get("/metrics");
    return result ? result->body : "";
  }

  static ServerProcess* server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};
ServerProcess* BackendFaultsTest::server_ = nullptr;

TEST_F(BackendFaultsTest, FailingAndThrowingBatchesFailOnlyTheirOwnRequests) {
  int ok = 0, failed = 0, threw = 0;
  for (int i = 0; i < 100; ++i) {
    grpc::Status s = Infer("flaky");
    if (s.ok()) {
      ++ok;
      continue;
    }
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INTERNAL) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("model flaky, bucket (batch 1, length 16), instance 0 (flaky#0 on sim)"));
    EXPECT_THAT(s.error_message(), AnyOf(HasSubstr("sim injected failure"), HasSubstr("threw: sim injected exception")));
    (s.error_message().find("threw") != std::string::npos ? threw : failed)++;
  }
  // Seeded draws, 20 % + 20 %: both kinds happen and most requests succeed.
  EXPECT_GT(ok, 40);
  EXPECT_GT(failed, 5);
  EXPECT_GT(threw, 5);
  EXPECT_TRUE(Ready("flaky"));
  EXPECT_THAT(Metrics(), HasSubstr("sluice_requests_total{model=\"flaky\",outcome=\"backend_error\"} " +
                                   std::to_string(failed + threw)));
}

TEST_F(BackendFaultsTest, InstancesWhoseDeviceIsGoneLeaveRotationUntilNoneIsLeft) {
  int ok = 0, unavailable = 0;
  for (int i = 0; i < 12; ++i) {
    grpc::Status s = Infer("vanishing");
    if (s.ok()) {
      ++ok;
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
      ++unavailable;
    }
  }
  // Each of the two instances serves 3 batches, fails its 4th (that request only) and leaves rotation; then the
  // model has no instance and says so.
  EXPECT_EQ(ok, 6);
  EXPECT_EQ(unavailable, 6);
  grpc::Status after = Infer("vanishing");
  EXPECT_EQ(after.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(after.error_message(), HasSubstr("no instance left in rotation"));
  EXPECT_FALSE(Ready("vanishing"));
  const std::string metrics = Metrics();
  EXPECT_THAT(metrics, HasSubstr("sluice_instances_in_rotation{model=\"vanishing\"} 0"));
  EXPECT_THAT(metrics, HasSubstr("sluice_model_ready{model=\"vanishing\"} 0"));
  // The other model, and the process, serve on.
  EXPECT_THAT(metrics, HasSubstr("sluice_instances_in_rotation{model=\"flaky\"} 1"));
  int flaky_ok = 0;
  for (int i = 0; i < 10; ++i) flaky_ok += Infer("flaky").ok() ? 1 : 0;
  EXPECT_GT(flaky_ok, 0);
}

TEST(BackendHangTest, AHungExecutionIsAnsweredAtTheTimeoutTheOtherInstanceServesAndTheServerStillDrains) {
  ServerProcess server("", {}, hanging_repository.path());
  ASSERT_TRUE(server.ready()) << server.Log();
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  auto infer = [&] { return InferOne(*stub, "hanging"); };
  // One at a time: instance 0 (the first free one) takes most batches until it hangs on its third; exactly
  // that request fails, at the timeout, and every other is served (by instance 1 after the hang).
  int ok = 0, unavailable = 0;
  for (int i = 0; i < 20; ++i) {
    const auto before = std::chrono::steady_clock::now();
    grpc::Status s = infer();
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
    if (s.ok()) {
      ++ok;
      continue;
    }
    ++unavailable;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr("model hanging, bucket (batch 1, length 16), instance 0 (hanging#0 on sim)"));
    EXPECT_THAT(s.error_message(), HasSubstr("did not finish within execution_timeout_ms 300"));
    EXPECT_GE(waited, 0.29);  // answered at the timeout, not before
    EXPECT_LT(waited, 15);
  }
  EXPECT_EQ(unavailable, 1);
  EXPECT_EQ(ok, 19);
  httplib::Client http("127.0.0.1", server.http_port());
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("sluice_instances_in_rotation{model=\"hanging\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("sluice_execution_timeouts_total{instance=\"0\",model=\"hanging\"} 1"));
  EXPECT_THAT(metrics->body, HasSubstr("sluice_model_ready{model=\"hanging\"} 1"));
  // SIGTERM: everything accepted was answered, so the drain completes and the process exits 0 at once although
  // instance 0's thread is still inside its backend.
  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(20)), 0) << server.Log();
}

}  // namespace
}  // namespace sluice
