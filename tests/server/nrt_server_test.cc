// The whole sluice-server serving a model through the Neuron Runtime backend (device neuron, runtime nrt) with
// the fake libnrt (tests/backend/fake_libnrt.cc) as its neuron_library: KServe v2 over HTTP and gRPC, results
// computed by the fake NEFF (y = x * scale on the real rows), each replica on its own NeuronCore, a bad request
// refused while serving goes on, and on SIGTERM every NEFF unloaded, nrt_close called and exit 0; the example
// models (text_embed, asr_digits) served through it next to their TorchScript selves, answering alike; llama_tiny
// generating over OpenAI /v1/completions as its TorchScript self does; and a SIGTERM during loading releasing what
// was loaded. Not hardware: no real libnrt or NEFF is exercised here.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "backend/nrt/safetensors_file.h"
#include "httplib.h"
#include "tests/backend/nrt_toy_model.h"
#include "tests/float_tolerance.h"
#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
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
  // The orderly shutdown unloads every NEFF (2 replicas x 4 buckets), frees every tensor and closes the runtime.
  EXPECT_THAT(ReadAll(log), HasSubstr("nrt_close loads=8 unloads=8 weight_allocations=2 cache_allocations=2 "));
  EXPECT_THAT(ReadAll(log), HasSubstr("live_models=0 live_tensors=0 live_sets=0"));
  EXPECT_THAT(server.Log(), HasSubstr("models unloaded"));
  unsetenv("FAKE_LIBNRT_LOG");
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(root);
}

// Lines of the fake's log starting with `prefix`.
int CountLines(const std::string& text, const std::string& prefix) {
  int n = 0;
  for (size_t at = 0; (at = text.find(prefix, at)) != std::string::npos; ++at) n += at == 0 || text[at - 1] == '\n';
  return n;
}

void ExpectClose(std::span<const float> got, std::span<const float> want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tolerance = testing::CrossShapeTolerance(want);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(double{got[i]} - want[i]));
  EXPECT_LE(worst, tolerance) << what;
}

// KServe v2 JSON: the first output's data.
std::vector<float> HttpEmbedding(httplib::Client& client, const std::string& model, const std::vector<int64_t>& ids) {
  std::string data;
  for (int64_t id : ids) data += (data.empty() ? "" : ",") + std::to_string(id);
  auto res = client.Post("/v2/models/" + model + "/infer",
                         R"({"inputs":[{"name":"input_ids","datatype":"INT64","shape":[1,)" +
                             std::to_string(ids.size()) + R"(],"data":[)" + data + "]}]}",
                         "application/json");
  if (!res || res->status != 200) {
    ADD_FAILURE() << model << ": " << (res ? res->body : "no answer");
    return {};
  }
  rapidjson::Document doc;
  doc.Parse(res->body.c_str());
  std::vector<float> values;
  for (const auto& v : doc["outputs"][0]["data"].GetArray()) values.push_back(v.GetFloat());
  return values;
}

// KServe v2 gRPC: log_probs of one utterance, and its frame count.
std::vector<float> GrpcLogProbs(inference::GRPCInferenceService::Stub& stub, const std::string& model,
                                const std::vector<float>& audio, int64_t* frames) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* input = request.add_inputs();
  input->set_name("audio");
  input->set_datatype("FP32");
  input->add_shape(1);
  input->add_shape(static_cast<int64_t>(audio.size()));
  request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(audio.data()), audio.size() * 4));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  inference::ModelInferResponse response;
  grpc::Status status = stub.ModelInfer(&context, request, &response);
  if (!status.ok() || response.raw_output_contents_size() != 1 || response.outputs(0).shape_size() != 3) {
    ADD_FAILURE() << model << ": " << status.error_message();
    return {};
  }
  *frames = response.outputs(0).shape(1);
  const std::string& bytes = response.raw_output_contents(0);
  const auto* begin = reinterpret_cast<const float*>(bytes.data());
  return std::vector<float>(begin, begin + bytes.size() / 4);
}

TEST(NrtServerTest, ServesTheExampleModelsAsTheTorchScriptPathDoesAndReleasesTheRuntimeAtShutdown) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("sluice_nrt_examples_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const std::string log = (root / "libnrt.log").string();
  setenv("FAKE_LIBNRT_LOG", log.c_str(), 1);
  unsetenv("NEURON_RT_VISIBLE_CORES");
  ServerProcess::Options options;
  options.source_repository = SLUICE_NRT_MODELS_DIR;  // each model twice: TorchScript (cpu) and runtime nrt
  options.models = {"text_embed", "text_embed_nrt", "asr_digits", "asr_digits_nrt"};
  ServerProcess server(options);
  ASSERT_TRUE(server.ready()) << server.Log();

  httplib::Client client("http://" + server.http_address());
  std::mt19937 gen(7);
  for (size_t tokens : {5u, 40u, 200u}) {
    std::vector<int64_t> ids(tokens);
    for (int64_t& id : ids) id = std::uniform_int_distribution<int64_t>(1, 8000)(gen);
    const std::vector<float> want = HttpEmbedding(client, "text_embed", ids);
    const std::vector<float> got = HttpEmbedding(client, "text_embed_nrt", ids);
    ASSERT_EQ(want.size(), 256u);
    ExpectClose(got, want, "text_embed, " + std::to_string(tokens) + " tokens");
  }
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
  for (size_t samples : {9000u, 30000u, 100000u}) {
    std::vector<float> audio(samples);
    for (float& a : audio) a = std::uniform_real_distribution<float>(-0.3f, 0.3f)(gen);
    int64_t want_frames = 0, got_frames = 0;
    const std::vector<float> want = GrpcLogProbs(*stub, "asr_digits", audio, &want_frames);
    const std::vector<float> got = GrpcLogProbs(*stub, "asr_digits_nrt", audio, &got_frames);
    ASSERT_GT(want_frames, 0);
    EXPECT_EQ(got_frames, want_frames);
    ExpectClose(got, want, "asr_digits, " + std::to_string(samples) + " samples");
  }

  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(60)), 0) << server.Log();
  const std::string calls = ReadAll(log);
  // Two replicas per model, each on its own NeuronCore (text_embed_nrt 0-1, asr_digits_nrt 2-3), every bucket's
  // NEFF loaded once per replica.
  const int text_buckets = 15, asr_buckets = 16;
  EXPECT_EQ(CountLines(calls, "nrt_load vnc=0 vnc_count=-1"), text_buckets);
  EXPECT_EQ(CountLines(calls, "nrt_load vnc=1 vnc_count=-1"), text_buckets);
  EXPECT_EQ(CountLines(calls, "nrt_load vnc=2 vnc_count=-1"), asr_buckets);
  EXPECT_EQ(CountLines(calls, "nrt_load vnc=3 vnc_count=-1"), asr_buckets);
  EXPECT_EQ(CountLines(calls, "nrt_init"), 1);
  // One device copy of each weight per replica, whatever the bucket count.
  int weights = 0;
  for (const char* model : {"text_embed_nrt", "asr_digits_nrt"}) {
    absl::StatusOr<SafetensorsFile> file =
        SafetensorsFile::Open(std::string(SLUICE_NRT_MODELS_DIR) + "/" + model + "/weights.safetensors");
    ASSERT_TRUE(file.ok()) << file.status();
    weights += static_cast<int>(file->tensors().size());
  }
  const int loads = 2 * (text_buckets + asr_buckets);
  EXPECT_THAT(calls, HasSubstr(absl::StrCat("nrt_close loads=", loads, " unloads=", loads,
                                            " weight_allocations=", 2 * weights, " cache_allocations=0 ")));
  EXPECT_THAT(calls, HasSubstr("live_models=0 live_tensors=0 live_sets=0"));
  EXPECT_EQ(CountLines(calls, "nrt_close"), 1);
  unsetenv("FAKE_LIBNRT_LOG");
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(root);
}


// One OpenAI /v1/completions request, greedy; the choice's text and completion token count ("" and -1 on error).
std::pair<std::string, int> Complete(const std::string& http_address, const std::string& model,
                                     const std::string& prompt, int max_tokens) {
  rapidjson::StringBuffer body;
  rapidjson::Writer<rapidjson::StringBuffer> w(body);
  w.StartObject();
  w.Key("model");
  w.String(model.c_str());
  w.Key("prompt");
  w.String(prompt.c_str(), static_cast<rapidjson::SizeType>(prompt.size()));
  w.Key("max_tokens");
  w.Int(max_tokens);
  w.Key("temperature");
  w.Int(0);
  w.EndObject();
  httplib::Client client("http://" + http_address);
  client.set_read_timeout(120, 0);
  auto res = client.Post("/v1/completions", body.GetString(), "application/json");
  if (!res || res->status != 200) return {res ? res->body : "no answer", -1};
  rapidjson::Document doc;
  doc.Parse(res->body.c_str());
  if (doc.HasParseError() || !doc.HasMember("choices")) return {res->body, -1};
  return {doc["choices"][0]["text"].GetString(), doc["usage"]["completion_tokens"].GetInt()};
}

// llama_tiny served twice by one server — TorchScript on cpu and runtime nrt through the fake libnrt (two replicas,
// one KV cache set each, bound to all 20 NEFFs) — with several prompts in flight at once on each: every greedy
// completion is token-identical. Both paths run the same graphs, but the continuous batcher may group a sequence's
// decode steps into other batch buckets in the two engines, so logits can differ by float rounding across graph
// shapes; only prompts whose reference top-2 margins (reference_generation.json) stay above
// tests/float_tolerance.h's kNearTieMargin over the generated tokens are used, where such rounding cannot swap a
// token.
TEST(NrtServerTest, GeneratesAsTheTorchScriptPathOverOpenAiCompletions) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("sluice_nrt_llama_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const std::string log = (root / "libnrt.log").string();
  setenv("FAKE_LIBNRT_LOG", log.c_str(), 1);
  unsetenv("NEURON_RT_VISIBLE_CORES");
  constexpr int kMaxTokens = 16;
  rapidjson::Document reference;
  reference.Parse(ReadAll(std::string(SLUICE_NRT_MODELS_DIR) + "/llama_tiny/reference_generation.json").c_str());
  ASSERT_FALSE(reference.HasParseError());
  std::vector<std::string> prompts;
  for (const auto& c : reference["cases"].GetArray()) {
    if (c.HasMember("messages")) continue;
    double margin = 1e9;
    for (int i = 0; i < kMaxTokens; ++i) margin = std::min(margin, c["top2_margins"][i].GetDouble());
    if (margin > testing::kNearTieMargin) prompts.push_back(c["prompt"].GetString());
  }
  ASSERT_GE(prompts.size(), 6u) << "too few reference prompts clear of near-ties";

  ServerProcess::Options options;
  options.source_repository = SLUICE_NRT_MODELS_DIR;
  options.models = {"llama_tiny", "llama_tiny_nrt"};
  const auto start = std::chrono::steady_clock::now();
  ServerProcess server(options);
  ASSERT_TRUE(server.ready()) << server.Log();
  const double ready_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Every prompt to both models at once: 2 x prompts requests in flight, batched by each engine as they come.
  std::vector<std::pair<std::string, int>> want(prompts.size()), got(prompts.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < prompts.size(); ++i) {
    clients.emplace_back([&, i] { want[i] = Complete(server.http_address(), "llama_tiny", prompts[i], kMaxTokens); });
    clients.emplace_back([&, i] { got[i] = Complete(server.http_address(), "llama_tiny_nrt", prompts[i], kMaxTokens); });
  }
  for (std::thread& t : clients) t.join();
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_GT(want[i].second, 0) << want[i].first;
    EXPECT_EQ(got[i], want[i]) << "prompt " << i << ": " << prompts[i].substr(0, 40);
  }
  std::printf("[ timing ] llama_tiny + llama_tiny_nrt ready in %.1f s; %zu x 2 concurrent completions in %.1f s\n",
              ready_s, prompts.size(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() - ready_s);

  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(60)), 0) << server.Log();
  const std::string calls = ReadAll(log);
  // 2 replicas x 20 NEFFs; one K and one V cache per replica; every NEFF unloaded, nrt_close once.
  EXPECT_THAT(calls, HasSubstr("nrt_close loads=40 unloads=40 weight_allocations=78 cache_allocations=4 "));
  EXPECT_THAT(calls, HasSubstr("live_models=0 live_tensors=0 live_sets=0"));
  EXPECT_EQ(CountLines(calls, "nrt_close"), 1);
  unsetenv("FAKE_LIBNRT_LOG");
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(root);
}

// SIGTERM while the NEFFs are still loading (each nrt_load slowed down by the fake): the server stops the load,
// unloads what it had loaded, calls nrt_close once and exits 0, within a bounded time.
TEST(NrtServerTest, SigtermDuringLoadingUnloadsWhatWasLoadedAndClosesTheRuntime) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("sluice_nrt_stop_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const std::string log = (root / "libnrt.log").string();
  setenv("FAKE_LIBNRT_LOG", log.c_str(), 1);
  setenv("FAKE_LIBNRT_LOAD_DELAY_MS", "100", 1);  // 30 loads: 3 s at least
  unsetenv("NEURON_RT_VISIBLE_CORES");
  ServerProcess::Options options;
  options.source_repository = SLUICE_NRT_MODELS_DIR;
  options.models = {"text_embed_nrt"};  // 2 replicas x 15 NEFFs
  options.return_when_listening = true;
  ServerProcess server(options);
  unsetenv("FAKE_LIBNRT_LOAD_DELAY_MS");
  ASSERT_TRUE(server.ready()) << server.Log();
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (CountLines(ReadAll(log), "nrt_load ") < 3 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(CountLines(ReadAll(log), "nrt_load "), 3) << server.Log();
  const auto signalled = std::chrono::steady_clock::now();
  server.Signal(SIGTERM);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(30)), 0) << server.Log();
  const double stop_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - signalled).count();
  const std::string calls = ReadAll(log);
  const int loads = CountLines(calls, "nrt_load ");
  std::printf("[ timing ] SIGTERM during loading: exited in %.2f s, after %d of 30 NEFF loads\n", stop_s, loads);
  EXPECT_LT(loads, 30) << "the load was meant to be interrupted";
  EXPECT_EQ(CountLines(calls, "nrt_unload "), loads) << calls;
  EXPECT_THAT(calls, HasSubstr(absl::StrCat("nrt_close loads=", loads, " unloads=", loads, " ")));
  EXPECT_THAT(calls, HasSubstr("live_models=0 live_tensors=0 live_sets=0"));
  EXPECT_EQ(CountLines(calls, "nrt_close"), 1);
  EXPECT_THAT(server.Log(), HasSubstr("loading stopped"));
  EXPECT_THAT(server.Log(), Not(HasSubstr("READY")));
  unsetenv("FAKE_LIBNRT_LOG");
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace sluice
