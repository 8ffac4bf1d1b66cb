// The generation front ends in-process (no Server class, no libtorch): a GenerationModel on the sim generation
// device with llama_tiny's SentencePiece tokenizer, behind a ModelHub, served over loopback by the HTTP service
// (OpenAI /v1/completions and /v1/chat/completions, streamed and whole) and the KServe gRPC service (Triton's
// ModelStreamInfer). Concurrent calls, several requests interleaved on one stream, clients that go away mid-way —
// so that the OpenAI sinks, the ModelStreamInfer reactor and the engine's hand-offs run under ThreadSanitizer and
// ASan/UBSan (tests/sanitizers, tests/asan), which instrument only what they compile, not a server process.
// Greedy sampling (temperature 0) on the sim device is deterministic: every way of asking for the same prompt must
// give the same text.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "backend/base/model_config.h"
#include "backend/sim_generation_backend.h"
#include "grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "rapidjson/document.h"
#include "server/kserve/grpc_service.h"
#include "server/kserve/http_service.h"
#include "server/llm/generation_model.h"
#include "server/llm/frontend/triton_stream_codec.h"
#include "server/hub/model_hub.h"
#include "server/metrics/server_metrics.h"

namespace sluice {
namespace {

constexpr char kModel[] = "tiny_sim";

// The sim generation model of tests/llm/generation_model_test.cc: 4 KV slots, `step_ms` per engine step.
ModelConfig SimGenerationConfig(double step_ms) {
  ModelConfig config;
  config.name = kModel;
  config.kind = ModelKind::kGeneration;
  GenerationOptions g;
  g.tokenizer_path = std::string(SLUICE_MODELS_DIR) + "/llama_tiny/tokenizer.model";
  g.vocab_size = 2000;
  g.context_length = 256;
  g.kv_cache = {4, 1, 1, 8};
  g.prefill_lengths = {16, 64, 128};
  g.decode_batch_sizes = {1, 2, 4};
  g.kv_lengths = {128, 256};
  g.bos_token_id = 1;
  g.eos_token_id = 2;
  g.max_num_seqs = 4;
  g.prefill_token_budget = 128;
  g.max_queue_size = 64;
  g.default_max_tokens = 12;
  config.generation = g;
  config.sim = SimCostModel{step_ms};
  InstanceGroup group;
  group.device = DeviceKind::kSim;
  config.instances = {group};
  return config;
}

// The model behind a hub, the HTTP and gRPC services on loopback ports; torn down in dependency order.
class InProcessGeneration {
 public:
  explicit InProcessGeneration(double step_ms = 1.0) : config_(SimGenerationConfig(step_ms)) {
    absl::StatusOr<std::unique_ptr<GenerationBackend>> backend =
        CreateSimGenerationBackend(InstanceOptions{&config_, config_.instances.front(), 0, 1});
    EXPECT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    GenerationModelOptions options;
    options.config = &config_;
    options.instances = {backend_.get()};
    options.state = &hub_.state();
    options.metrics = &metrics_;
    absl::StatusOr<std::unique_ptr<GenerationModel>> model = GenerationModel::Create(options);
    EXPECT_TRUE(model.ok()) << model.status();
    std::vector<std::unique_ptr<GenerationModel>> generation;
    generation.push_back(*std::move(model));
    hub_.Publish({}, std::move(generation));
    hub_.state().SetReady();

    absl::StatusOr<std::unique_ptr<HttpService>> http =
        HttpService::Start(HttpServiceOptions{.hub = &hub_, .address = "127.0.0.1:0"});
    EXPECT_TRUE(http.ok()) << http.status();
    http_ = *std::move(http);
    grpc_service_ = std::make_unique<InferenceGrpcService>(&hub_, "");
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(grpc_service_.get());
    grpc_server_ = builder.BuildAndStart();
    EXPECT_NE(port, 0);
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  ~InProcessGeneration() {
    grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc_server_.reset();
    http_->Stop();
    http_.reset();
    hub_.state().BeginDrain();
    hub_.StopAll();  // every accepted request is answered before the model goes
  }

  int http_port() const { return http_->port(); }
  inference::GRPCInferenceService::Stub& stub() { return *stub_; }
  ModelHub& hub() { return hub_; }

  // Polls until no generation is waiting or running (cancelled ones free their slots), up to 10 s.
  int64_t WaitForNoneInFlight() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (hub_.InFlight() != 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return hub_.InFlight();
  }

 private:
  ModelConfig config_;
  std::unique_ptr<GenerationBackend> backend_;
  ServerMetrics metrics_{absl::Now(), std::nullopt};
  ModelHub hub_{&metrics_};
  std::unique_ptr<HttpService> http_;
  std::unique_ptr<InferenceGrpcService> grpc_service_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

// ---- OpenAI over HTTP -------------------------------------------------------------------------------------------

std::string CompletionBody(const std::string& prompt, bool stream, int max_tokens) {
  return "{\"model\":\"tiny_sim\",\"prompt\":\"" + prompt + "\",\"max_tokens\":" + std::to_string(max_tokens) +
         ",\"temperature\":0,\"stream\":" + (stream ? "true" : "false") + "}";
}

std::string ChatBody(const std::string& content, bool stream, int max_tokens) {
  return "{\"model\":\"tiny_sim\",\"messages\":[{\"role\":\"user\",\"content\":\"" + content +
         "\"}],\"max_tokens\":" + std::to_string(max_tokens) + ",\"temperature\":0,\"stream\":" +
         (stream ? "true" : "false") + "}";
}

struct HttpAnswer {
  int status = 0;
  std::string body;
};

HttpAnswer Post(int port, const std::string& path, const std::string& body) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(60, 0);
  httplib::Result result = client.Post(path.c_str(), body, "application/json");
  if (!result) return HttpAnswer{.status = -1, .body = httplib::to_string(result.error())};
  return HttpAnswer{.status = result->status, .body = result->body};
}

// choices[0]'s text of one JSON object: `text` (completions), message.content or delta.content (chat).
std::string ChoiceText(const std::string& json) {
  rapidjson::Document doc;
  doc.Parse(json.c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("choices") || !doc["choices"].IsArray() ||
      doc["choices"].Empty()) {
    return "";
  }
  const rapidjson::Value& choice = doc["choices"][0];
  if (choice.HasMember("text") && choice["text"].IsString()) return choice["text"].GetString();
  for (const char* key : {"message", "delta"}) {
    if (choice.HasMember(key) && choice[key].IsObject() && choice[key].HasMember("content") &&
        choice[key]["content"].IsString()) {
      return choice[key]["content"].GetString();
    }
  }
  return "";
}

struct SseStream {
  std::string text;    // the chunks' text, in order
  bool done = false;   // "data: [DONE]" was the last event
  bool error = false;  // an error event came
};

SseStream ParseSse(const std::string& body) {
  SseStream out;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
    at = end == std::string::npos ? body.size() : end + 2;
    out.done = data == "[DONE]";
    if (out.done) continue;
    out.error = out.error || data.find("\"error\"") != std::string::npos;
    out.text += ChoiceText(data);
  }
  return out;
}

TEST(GenerationServicesInProcessTest, ConcurrentOpenAiCallsStreamedAndWholeGiveTheSameGreedyText) {
  InProcessGeneration server;
  const HttpAnswer reference = Post(server.http_port(), "/v1/completions", CompletionBody("Hello there", false, 10));
  ASSERT_EQ(reference.status, 200) << reference.body;
  const std::string expected = ChoiceText(reference.body);
  ASSERT_FALSE(expected.empty()) << reference.body;
  const HttpAnswer chat_reference = Post(server.http_port(), "/v1/chat/completions", ChatBody("Hello there", false, 10));
  ASSERT_EQ(chat_reference.status, 200) << chat_reference.body;
  const std::string chat_expected = ChoiceText(chat_reference.body);
  ASSERT_FALSE(chat_expected.empty()) << chat_reference.body;

  // 8 clients at once (4 KV slots: half of them wait), each asking 3 times in each of the 4 ways.
  constexpr int kClients = 8, kRounds = 3;
  std::vector<std::vector<std::string>> failures(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int round = 0; round < kRounds; ++round) {
        const bool chat = (c + round) % 2 == 1;
        const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
        const std::string& want = chat ? chat_expected : expected;
        const HttpAnswer whole =
            Post(server.http_port(), path, chat ? ChatBody("Hello there", false, 10) : CompletionBody("Hello there", false, 10));
        if (whole.status != 200 || ChoiceText(whole.body) != want) {
          failures[c].push_back(path + " whole: " + std::to_string(whole.status) + " " + whole.body);
        }
        const HttpAnswer streamed =
            Post(server.http_port(), path, chat ? ChatBody("Hello there", true, 10) : CompletionBody("Hello there", true, 10));
        const SseStream sse = ParseSse(streamed.body);
        if (streamed.status != 200 || !sse.done || sse.error || sse.text != want) {
          failures[c].push_back(path + " streamed: " + std::to_string(streamed.status) + " " + streamed.body);
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  for (const auto& each : failures) {
    for (const std::string& failure : each) ADD_FAILURE() << failure;
  }
  EXPECT_EQ(server.WaitForNoneInFlight(), 0);
}

// Sends a streamed completion on a raw socket, reads until the first text chunk (or `read_bytes`), then closes.
void StreamThenHangUp(int port, const std::string& body, size_t read_bytes) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  ASSERT_EQ(::send(fd, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  std::string got;
  char buffer[1024];
  while (got.size() < read_bytes) {
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    got.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
}

TEST(GenerationServicesInProcessTest, OpenAiClientsThatHangUpMidStreamFreeTheirSlots) {
  InProcessGeneration server(/*step_ms=*/5.0);  // 200 tokens take about a second: the hang-ups come first
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      StreamThenHangUp(server.http_port(), CompletionBody("Tell me a long story", true, 200),
                       /*read_bytes=*/c % 2 == 0 ? 1 : 400);
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(server.WaitForNoneInFlight(), 0) << "generations of clients that left still hold their slots";
  const HttpAnswer after = Post(server.http_port(), "/v1/completions", CompletionBody("Hello there", true, 4));
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_TRUE(ParseSse(after.body).done) << after.body;
}

// ---- Triton ModelStreamInfer over gRPC ---------------------------------------------------------------------------

inference::ModelInferRequest TritonRequest(const std::string& model, const std::string& text, const std::string& id,
                                           bool stream, int max_tokens) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_id(id);
  auto add = [&](const std::string& name, const std::string& datatype, const std::string& raw) {
    auto* input = request.add_inputs();
    input->set_name(name);
    input->set_datatype(datatype);
    input->add_shape(1);
    *request.add_raw_input_contents() = raw;
  };
  add("text_input", "BYTES", SerializeBytesElement(text));
  add("stream", "BOOL", std::string(1, stream ? '\1' : '\0'));
  add("exclude_input_in_output", "BOOL", std::string(1, '\1'));
  add("sampling_parameters", "BYTES",
      SerializeBytesElement("{\"temperature\": 0, \"max_tokens\": " + std::to_string(max_tokens) + "}"));
  return request;
}

std::string TextOutput(const inference::ModelStreamInferResponse& response) {
  const inference::ModelInferResponse& infer = response.infer_response();
  if (infer.raw_output_contents_size() == 0 || infer.raw_output_contents(0).size() < 4) return "";
  return infer.raw_output_contents(0).substr(4);  // one BYTES element: its 4-byte length, then the text
}

bool IsFinal(const inference::ModelStreamInferResponse& response) {
  const auto& parameters = response.infer_response().parameters();
  const auto it = parameters.find("triton_final_response");
  return it != parameters.end() && it->second.bool_param();
}

struct PerRequest {
  std::string text;
  int finals = 0;
  bool after_final = false;  // a response came after the final one
  std::string error;
};

// Writes `requests` on one stream (a reader thread reading meanwhile), half-closes, reads to the end.
std::map<std::string, PerRequest> RunStream(inference::GRPCInferenceService::Stub& stub,
                                            const std::vector<inference::ModelInferRequest>& requests,
                                            grpc::Status* status) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub.ModelStreamInfer(&context);
  std::map<std::string, PerRequest> out;
  std::thread reader([&] {
    inference::ModelStreamInferResponse response;
    while (stream->Read(&response)) {
      PerRequest& one = out[response.infer_response().id()];
      one.after_final = one.after_final || one.finals > 0;
      if (!response.error_message().empty()) one.error = response.error_message();
      one.text += TextOutput(response);
      one.finals += IsFinal(response) ? 1 : 0;
    }
  });
  for (const auto& request : requests) EXPECT_TRUE(stream->Write(request));
  stream->WritesDone();
  reader.join();
  *status = stream->Finish();
  return out;
}

TEST(GenerationServicesInProcessTest, RequestsInterleavedOnModelStreamInferStreamsEachEndWithOneFinal) {
  InProcessGeneration server;
  grpc::Status status;
  std::map<std::string, PerRequest> reference =
      RunStream(server.stub(), {TritonRequest(kModel, "Hello there", "whole", false, 10)}, &status);
  ASSERT_TRUE(status.ok()) << status.error_message();
  const std::string expected = reference["whole"].text;
  ASSERT_FALSE(expected.empty());
  ASSERT_TRUE(reference["whole"].error.empty()) << reference["whole"].error;

  // 4 streams at once, each with 6 requests in flight (streamed and whole), and one refused request each.
  constexpr int kStreams = 4, kRequests = 6;
  std::vector<std::map<std::string, PerRequest>> results(kStreams);
  std::vector<grpc::Status> statuses(kStreams);
  std::vector<std::thread> streams;
  for (int s = 0; s < kStreams; ++s) {
    streams.emplace_back([&, s] {
      std::vector<inference::ModelInferRequest> requests;
      for (int r = 0; r < kRequests; ++r) {
        requests.push_back(TritonRequest(kModel, "Hello there", "r" + std::to_string(r), r % 2 == 0, 10));
      }
      requests.push_back(TritonRequest("no_such_model", "x", "refused", true, 4));
      results[s] = RunStream(server.stub(), requests, &statuses[s]);
    });
  }
  for (std::thread& t : streams) t.join();
  for (int s = 0; s < kStreams; ++s) {
    EXPECT_TRUE(statuses[s].ok()) << statuses[s].error_message();
    for (int r = 0; r < kRequests; ++r) {
      const PerRequest& one = results[s]["r" + std::to_string(r)];
      EXPECT_TRUE(one.error.empty()) << one.error;
      EXPECT_EQ(one.text, expected) << "stream " << s << " request " << r;
      EXPECT_EQ(one.finals, 1) << "stream " << s << " request " << r;
      EXPECT_FALSE(one.after_final) << "stream " << s << " request " << r;
    }
    EXPECT_NE(results[s]["refused"].error.find("no_such_model"), std::string::npos) << results[s]["refused"].error;
  }
  EXPECT_EQ(server.WaitForNoneInFlight(), 0);
}

TEST(GenerationServicesInProcessTest, ModelStreamInferStreamsCancelledMidWayFreeTheirSlots) {
  InProcessGeneration server(/*step_ms=*/5.0);
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      grpc::ClientContext context;
      auto stream = server.stub().ModelStreamInfer(&context);
      for (int r = 0; r < 2; ++r) {
        stream->Write(TritonRequest(kModel, "Tell me a long story", "r" + std::to_string(r), true, 200));
      }
      inference::ModelStreamInferResponse response;
      for (int read = 0; read < c % 3 && stream->Read(&response); ++read) {
      }
      context.TryCancel();
      while (stream->Read(&response)) {
      }
      const grpc::Status status = stream->Finish();
      EXPECT_TRUE(status.error_code() == grpc::StatusCode::CANCELLED || status.ok()) << status.error_message();
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(server.WaitForNoneInFlight(), 0) << "generations of cancelled streams still hold their slots";
  grpc::Status status;
  std::map<std::string, PerRequest> after =
      RunStream(server.stub(), {TritonRequest(kModel, "Hello there", "after", true, 4)}, &status);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(after["after"].finals, 1);
  EXPECT_TRUE(after["after"].error.empty()) << after["after"].error;
}

}  // namespace
}  // namespace sluice
