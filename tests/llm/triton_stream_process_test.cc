// Issue 23, ModelStreamInfer against the real sluice-server (sim generation model, llama_tiny's tokenizer):
// a client that sends requests without reading the answers gets its stream ended with RESOURCE_EXHAUSTED once
// more than kTritonStreamMaxQueuedResponses wait (the queue no longer grows without bound), and the server keeps
// serving; a text_input too long in bytes is refused INVALID_ARGUMENT naming the limit, before tokenizing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "grpc_service.grpc.pb.h"
#include "tests/server/server_process.h"

namespace sluice {
namespace {

std::filesystem::path WriteRepository() {
  const std::filesystem::path root = std::filesystem::temp_directory_path() /
                                     ("sluice_triton_stream_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "tiny_sim");
  std::filesystem::copy_file(std::filesystem::path(SLUICE_MODELS_DIR) / "llama_tiny" / "tokenizer.model",
                             root / "tiny_sim" / "tokenizer.model");
  std::ofstream(root / "tiny_sim" / "config.yaml")
      << "name: tiny_sim\nkind: generation\ngeneration:\n  tokenizer: tokenizer.model\n  vocab_size: 2000\n"
      << "  context_length: 256\n  kv_cache: {slots: 4, layers: 1, kv_heads: 1, head_dim: 8}\n"
      << "  prefill_lengths: [16, 64, 128]\n  decode_batch_sizes: [1, 2, 4]\n  kv_lengths: [128, 256]\n"
      << "  bos_token_id: 1\n  eos_token_id: 2\n  max_num_seqs: 4\n  prefill_token_budget: 128\n"
      << "  max_queue_size: 16\n  default_max_tokens: 4\n"
      << "instances: [{count: 1, device: sim}]\nsim: {base_ms: 1, per_sample_us: 0}\n";
  return root;
}

inference::ModelInferRequest TextRequest(const std::string& model, const std::string& text, const std::string& id) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_id(id);
  auto* input = request.add_inputs();
  input->set_name("text_input");
  input->set_datatype("BYTES");
  input->add_shape(1);
  std::string element(4, '\0');
  const uint32_t n = static_cast<uint32_t>(text.size());
  for (int i = 0; i < 4; ++i) element[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  element += text;
  *request.add_raw_input_contents() = element;
  return request;
}

class TritonStreamProcessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = new std::filesystem::path(WriteRepository());
    testing::ServerProcess::Options options;
    options.source_repository = repository_->string();
    server_ = new testing::ServerProcess(options);
    ASSERT_TRUE(server_->ready()) << server_->Log();
  }
  static void TearDownTestSuite() {
    delete server_;
    std::filesystem::remove_all(*repository_);
    delete repository_;
  }
  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(64 << 20);
    stub_ = inference::GRPCInferenceService::NewStub(
        grpc::CreateCustomChannel(server_->grpc_address(), grpc::InsecureChannelCredentials(), args));
  }

  // One request on a fresh stream, its responses until the final one.
  std::vector<inference::ModelStreamInferResponse> OneRequest(const inference::ModelInferRequest& request) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    auto stream = stub_->ModelStreamInfer(&context);
    EXPECT_TRUE(stream->Write(request));
    stream->WritesDone();
    std::vector<inference::ModelStreamInferResponse> out;
    inference::ModelStreamInferResponse response;
    while (stream->Read(&response)) out.push_back(response);
    EXPECT_TRUE(stream->Finish().ok());
    return out;
  }

  static inline testing::ServerProcess* server_ = nullptr;
  static inline std::filesystem::path* repository_ = nullptr;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub_;
};

TEST_F(TritonStreamProcessTest, AClientThatNeverReadsHasItsStreamEndedWithResourceExhausted) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  auto stream = stub_->ModelStreamInfer(&context);
  // Refused requests (an unknown model): each queues one small response, never merged. Write without reading
  // until the server ends the stream (bounded: at most 200k requests, about 10 MB).
  const inference::ModelInferRequest refused = TextRequest("no_such_model", "x", "r");
  int written = 0;
  while (written < 200000 && stream->Write(refused)) ++written;
  EXPECT_LT(written, 200000) << "the server never ended the stream";
  inference::ModelStreamInferResponse response;
  int read = 0;
  while (stream->Read(&response)) ++read;
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_NE(status.error_message().find("more than 1024 responses"), std::string::npos) << status.error_message();
  EXPECT_LT(read, written);

  // The server goes on serving, on a new stream.
  std::vector<inference::ModelStreamInferResponse> answer = OneRequest(TextRequest("tiny_sim", "Hello", "ok"));
  ASSERT_FALSE(answer.empty());
  EXPECT_TRUE(answer.back().error_message().empty()) << answer.back().error_message();
  EXPECT_EQ(answer.back().infer_response().id(), "ok");
}

TEST_F(TritonStreamProcessTest, ATextInputTooLongInBytesIsRefusedNamingTheLimit) {
  std::vector<inference::ModelStreamInferResponse> answer =
      OneRequest(TextRequest("tiny_sim", std::string(10 << 20, 'a'), "big"));
  ASSERT_EQ(answer.size(), 1u);
  const std::string& error = answer[0].error_message();
  EXPECT_NE(error.find("the prompt is 10485760 bytes"), std::string::npos) << error;
  EXPECT_NE(error.find("at most"), std::string::npos) << error;
  EXPECT_EQ(answer[0].infer_response().id(), "big");
  // A malformed request on a served model is answered by the model (one path) with the request's id.
  inference::ModelInferRequest no_input;
  no_input.set_model_name("tiny_sim");
  no_input.set_id("empty");
  answer = OneRequest(no_input);
  ASSERT_EQ(answer.size(), 1u);
  EXPECT_NE(answer[0].error_message().find("text_input"), std::string::npos) << answer[0].error_message();
  EXPECT_EQ(answer[0].infer_response().id(), "empty");
}

}  // namespace
}  // namespace sluice
