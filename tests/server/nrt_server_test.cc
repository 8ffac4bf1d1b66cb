// The whole sluice-server serving a model through the Neuron Runtime backend (device neuron, runtime nrt) with
// the fake libnrt (tests/backend/fake_libnrt.cc) as its neuron_library: KServe v2 over HTTP and gRPC, results
// computed by the fake NEFF (y = x * scale on the real rows), each replica on its own NeuronCore, a bad request
// refused while serving goes on, and a clean exit 0 on SIGTERM. Not hardware: no real libnrt is exercised here.
#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/backend/nrt_toy_model.h"
#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::NrtToyModel;
using testing::ServerProcess;

std::string ReadAll(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(NrtServerTest, ServesThroughTheNeuronRuntimeAndClosesItAtShutdown) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("sluice_nrt_server_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  NrtToyModel toy;
  toy.library = SLUICE_FAKE_LIBNRT;
  toy.cores = "0-1";
  toy.Write((root / "repo" / toy.name).string());
  const std::string log = (root / "libnrt.log").string();
  setenv("FAKE_LIBNRT_LOG", log.c_str(), 1);  // inherited by the server process
  unsetenv("NEURON_RT_VISIBLE_CORES");

  ServerProcess server("", {}, (root / "repo").string());
  ASSERT_TRUE(server.ready()) << server.Log();
  const std::string loads = ReadAll(log);
  EXPECT_THAT(loads, HasSubstr("nrt_load vnc=0"));
  EXPECT_THAT(loads, HasSubstr("nrt_load vnc=1"));

  // HTTP/JSON: one row of 3 steps (bucket length 4): y = x * {1, 2, 3, 4}, trimmed to 3 steps.
  httplib::Client client("http://" + server.http_address());
  auto res = client.Post("/v2/models/nrt_toy/infer",
                         R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3,4],)"
                         R"("data":[1,1,1,1, 2,2,2,2, 0.5,0.5,0.5,0.5]}]})",
                         "application/json");
  ASSERT_TRUE(res) << server.Log();
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_THAT(res->body, HasSubstr(R"("shape":[1,3,4],"data":[1.0,2.0,3.0,4.0,2.0,4.0,6.0,8.0,0.5,1.0,1.5,2.0])"));

  // gRPC: two requests of different lengths, each answered with its own rows.
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  for (int steps : {2, 7}) {
    inference::ModelInferRequest request;
    request.set_model_name("nrt_toy");
    auto* input = request.add_inputs();
    input->set_name("x");
    input->set_datatype("FP32");
    input->add_shape(1);
    input->add_shape(steps);
    input->add_shape(4);
    std::vector<float> x(steps * 4, 3.0f);
    request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(x.data()), x.size() * 4));
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    inference::ModelInferResponse response;
    grpc::Status status = stub->ModelInfer(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(response.raw_output_contents_size(), 1);
    ASSERT_EQ(response.outputs(0).shape_size(), 3);
    EXPECT_EQ(response.outputs(0).shape(1), steps);
    const std::string& bytes = response.raw_output_contents(0);
    ASSERT_EQ(bytes.size(), static_cast<size_t>(steps * 16));
    const auto* y = reinterpret_cast<const float*>(bytes.data());
    for (int i = 0; i < steps * 4; ++i) EXPECT_FLOAT_EQ(y[i], 3.0f * toy.scale[i % 4]) << i;
  }

  // A bad request is refused by name and the server keeps serving.
  auto bad = client.Post("/v2/models/nrt_toy/infer",
                         R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1,3,5],"data":[)"
                         R"(1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}]})",
                         "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;

  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(60)), 0) << server.Log();
  // The server ends with _Exit after draining, without destroying instances (one whose execution timed out may
  // still be inside its backend), so nrt_close is not called here; nrt_backend_tests check it at destruction.
  EXPECT_EQ(ReadAll(log).find("nrt_close"), std::string::npos);
  unsetenv("FAKE_LIBNRT_LOG");
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sluice
