// The Riva service's limits in the real sluice-server process over gRPC (sim speech models, no graphs): audio
// refused from its size before it is decoded, decoding off the gRPC threads (an unrelated ServerLive is answered
// while large files decode), bounded decode admission, the idle timeout of a silent stream, a refused window
// ending its stream, and the default speech model chosen by the server config (and checked at start).
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <thread>

#include "gmock/gmock.h"
#include "grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "riva/proto/riva_asr.grpc.pb.h"
#include "tests/server/server_process.h"
#include "tests/server/sim_models.h"

namespace sluice {
namespace {

namespace riva = nvidia::riva::asr;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::ServerProcess;

// A speech model on the sim device (10 ms per batch; 640 samples per output frame, four classes).
std::string SpeechConfig(const std::string& name, double max_audio_seconds, const std::string& batching,
                         const std::string& batch_sizes, int base_ms) {
  return "name: " + name + "\nkind: speech\n"
         "inputs:\n  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}\n"
         "outputs:\n  - {name: log_probs, dtype: FP32, shape: [-1, 4]}\n"
         "buckets: {lengths: [16000, 32000, 64000], batch_sizes: " + batch_sizes + "}\n"
         "batching: " + batching + "\n"
         "instances: [{count: 1, device: sim}]\n"
         "sim: {base_ms: " + std::to_string(base_ms) + ", per_sample_us: 0, output_steps_per_input_step: 0.0015625}\n"
         "speech:\n  vocabulary: [\"<blank>\", \"a\", \"b\", \" \"]\n  frame_samples: 640\n"
         "  max_audio_seconds: " + std::to_string(max_audio_seconds) + "\n  long_audio_overlap_ms: 640\n"
         "  streaming: {step_ms: 480, left_context_ms: 1280, lookahead_ms: 640}\n";
}

testing::SimRepository& repository = testing::AddConfigRepository(
    "riva_limits",
    {{"speech_long", SpeechConfig("speech_long", 3600, "{max_queue_delay_ms: 5, max_queue_size: 256}", "[1, 4, 8]", 10)},
     {"speech_short", SpeechConfig("speech_short", 120, "{max_queue_delay_ms: 5, max_queue_size: 256}", "[1, 4, 8]", 10)},
     // One window at a time, 300 ms each, and room for one more in the queue: concurrent streams are refused.
     {"speech_tiny_queue",
      SpeechConfig("speech_tiny_queue", 120, "{max_queue_delay_ms: 1, max_queue_size: 1}", "[1]", 300)},
     {"generic_sim", testing::SimModelConfig(testing::SimModel{.name = "generic_sim"})},
     // A generation model on the sim device, with the example LLM's tokenizer.
     {"gen_sim",
      "name: gen_sim\nkind: generation\ngeneration:\n  tokenizer: " SLUICE_MODELS_DIR "/llama_tiny/tokenizer.model\n"
      "  vocab_size: 2000\n  context_length: 256\n  kv_cache: {slots: 4, layers: 1, kv_heads: 1, head_dim: 8}\n"
      "  prefill_lengths: [16, 64, 128]\n  decode_batch_sizes: [1, 2, 4]\n  kv_lengths: [128, 256]\n"
      "  bos_token_id: 1\n  eos_token_id: 2\n  max_num_seqs: 4\n  prefill_token_budget: 128\n"
      "  max_queue_size: 64\n  default_max_tokens: 12\n"
      "instances: [{count: 1, device: sim}]\nsim: {base_ms: 5, per_sample_us: 0}\n"}});

// One decode at a time and one waiting (so that large files meet the admission bound), a short idle timeout.
constexpr char kVoiceYaml[] =
    "voice: {default_model: speech_long, stream_idle_timeout_ms: 1500, decode_threads: 1, max_waiting_decodes: 1}\n";

riva::RecognitionConfig Config(const std::string& model, nvidia::riva::AudioEncoding encoding, int rate) {
  riva::RecognitionConfig config;
  config.set_encoding(encoding);
  config.set_sample_rate_hertz(rate);
  config.set_audio_channel_count(1);
  config.set_model(model);
  return config;
}

std::string Pcm16(double seconds, int rate = 16000) {
  std::string bytes(static_cast<size_t>(seconds * rate) * 2, '\0');
  for (size_t i = 0; i < bytes.size() / 2; ++i) bytes[2 * i + 1] = static_cast<char>((i / 40) % 2 ? 0x10 : 0xF0);
  return bytes;
}

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// The server's peak resident memory so far (VmHWM), in bytes.
int64_t PeakRss(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

class RivaLimitsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess(kVoiceYaml, {}, repository.path()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_->ready()) << server_->Log();
    channel_ = grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials());
    riva_ = riva::RivaSpeechRecognition::NewStub(channel_);
    kserve_ = inference::GRPCInferenceService::NewStub(channel_);
  }

  grpc::Status Recognize(const riva::RecognitionConfig& config, const std::string& audio, int deadline_s,
                         riva::RecognizeResponse* response = nullptr) {
    riva::RecognizeRequest request;
    *request.mutable_config() = config;
    request.set_audio(audio);
    riva::RecognizeResponse ignored;
    grpc::ClientContext context;
    context.set_deadline(In(deadline_s));
    return riva_->Recognize(&context, request, response ? response : &ignored);
  }

  // One stream: the config, then each chunk (all at once), then close; its status.
  grpc::Status Stream(const riva::RecognitionConfig& config, const std::vector<std::string>& chunks, int deadline_s,
                      std::chrono::milliseconds pause = std::chrono::milliseconds(0)) {
    grpc::ClientContext context;
    context.set_deadline(In(deadline_s));
    auto stream = riva_->StreamingRecognize(&context);
    std::thread reader([&] {
      riva::StreamingRecognizeResponse response;
      while (stream->Read(&response)) {
      }
    });
    riva::StreamingRecognizeRequest first;
    *first.mutable_streaming_config()->mutable_config() = config;
    if (stream->Write(first)) {
      for (const std::string& chunk : chunks) {
        if (pause.count() > 0) std::this_thread::sleep_for(pause);
        riva::StreamingRecognizeRequest message;
        message.set_audio_content(chunk);
        if (!stream->Write(message)) break;
      }
      stream->WritesDone();
    }
    reader.join();
    return stream->Finish();
  }

  grpc::Status ServerLive() {
    grpc::ClientContext context;
    context.set_deadline(In(5));
    inference::ServerLiveResponse live;
    grpc::Status status = kserve_->ServerLive(&context, {}, &live);
    if (status.ok() && !live.live()) return grpc::Status(grpc::StatusCode::INTERNAL, "live=false");
    return status;
  }

  int64_t Rows(const std::string& model) {
    grpc::ClientContext context;
    inference::ModelStatisticsRequest request;
    request.set_name(model);
    inference::ModelStatisticsResponse response;
    EXPECT_TRUE(kserve_->ModelStatistics(&context, request, &response).ok());
    return response.model_stats_size() > 0 ? static_cast<int64_t>(response.model_stats(0).inference_count()) : -1;
  }

  static ServerProcess* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<riva::RivaSpeechRecognition::Stub> riva_;
  std::unique_ptr<inference::GRPCInferenceService::Stub> kserve_;
};
ServerProcess* RivaLimitsTest::server_ = nullptr;

// Issue 23: a 50 MB MULAW chunk at 1 kHz was decoded and resampled (110 s, +3.4 GB) before max_audio_seconds
// refused it, and two such streams stalled every gRPC call. Each 20 MB here would resample to 1.3 GB of floats.
TEST_F(RivaLimitsTest, HugeChunksAndFilesAreRefusedFromTheirSizeBeforeDecoding) {
  const int64_t peak_before = PeakRss(server_->pid());
  const std::string huge(20'000'000, '\x7f');  // 20000 s of 1 kHz mu-law, against a limit of 3600 s
  const riva::RecognitionConfig mulaw_1k = Config("speech_long", nvidia::riva::MULAW, 1000);
  std::vector<grpc::Status> streams(2);
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i) threads.emplace_back([&, i] { streams[i] = Stream(mulaw_1k, {huge}, 30); });
  const grpc::Status file = Recognize(mulaw_1k, huge, 30);
  EXPECT_TRUE(ServerLive().ok());
  for (std::thread& t : threads) t.join();
  for (const grpc::Status& s : streams) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), AllOf(HasSubstr("lasts 20000 s"), HasSubstr("limit of 3600 s"),
                                         HasSubstr("max_audio_seconds")));
  }
  EXPECT_EQ(file.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << file.error_message();
  EXPECT_THAT(file.error_message(), AllOf(HasSubstr("lasts 20000 s"), HasSubstr("max_audio_seconds")));
  // A stream's audio counts cumulatively: 80 s, then 50 s more (each fine alone) against speech_short's 120 s.
  const std::string part(80'000, '\x7f'), more(50'000, '\x7f');
  const grpc::Status cumulative = Stream(Config("speech_short", nvidia::riva::MULAW, 1000), {part, more}, 60);
  EXPECT_EQ(cumulative.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << cumulative.error_message();
  EXPECT_THAT(cumulative.error_message(), AllOf(HasSubstr("lasts 130 s"), HasSubstr("limit of 120 s")));
  // Nothing of the refused 20 MB chunks was decoded: the server's peak memory grew by far less than one decode.
  const int64_t growth = PeakRss(server_->pid()) - peak_before;
  EXPECT_LT(growth, int64_t{600} << 20) << "peak RSS grew by " << growth << " bytes";
  std::cout << "[ measured ] server peak RSS growth over the refused huge chunks/files: " << (growth >> 20)
            << " MiB\n";
  EXPECT_TRUE(ServerLive().ok());
}

// Issue 23: decoding ran on gRPC threads (4 half-hour 8 kHz files delayed ServerLive by seconds). Now files decode
// on the DecodeExecutor (one at a time here, one waiting; the rest are refused) while gRPC answers on.
TEST_F(RivaLimitsTest, ServerLiveIsAnsweredWhileLargeDecodesRunAndExtraDecodesAreRefused) {
  const std::string long_file(300 * 8000, '\x55');  // 5 min of 8 kHz mu-law: 29 MB decoded and resampled
  constexpr int kFiles = 4;
  std::vector<grpc::Status> results(kFiles);
  std::vector<float> processed(kFiles, 0);
  std::atomic<int> finished{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kFiles; ++i) {
    threads.emplace_back([&, i] {
      riva::RecognizeResponse response;
      results[i] = Recognize(Config("", nvidia::riva::MULAW, 8000), long_file, 120, &response);
      if (response.results_size() > 0) processed[i] = response.results(0).audio_processed();
      ++finished;
    });
  }
  int answered = 0;
  while (finished.load() < kFiles) {
    const grpc::Status live = ServerLive();  // each within a 5 s deadline, whatever the decodes do
    ASSERT_TRUE(live.ok()) << live.error_message();
    ++answered;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GE(answered, 1);
  int ok = 0;
  for (int i = 0; i < kFiles; ++i) {
    if (results[i].ok()) {
      ++ok;
      EXPECT_FLOAT_EQ(processed[i], 300.0f);
    } else {
      EXPECT_EQ(results[i].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << results[i].error_message();
      EXPECT_THAT(results[i].error_message(), HasSubstr("voice.max_waiting_decodes"));
    }
  }
  EXPECT_GE(ok, 1);
  std::cout << "[ measured ] " << ok << " of " << kFiles << " files served, " << kFiles - ok
            << " refused at admission; ServerLive answered " << answered << " times meanwhile\n";
  // Admission frees with the decodes: one more file is served.
  EXPECT_TRUE(Recognize(Config("", nvidia::riva::MULAW, 8000), long_file, 120).ok());
}

// Issue 23: a stream that sent its config and then nothing was held open forever.
TEST_F(RivaLimitsTest, ASilentStreamEndsWithDeadlineExceededButAStreamThatSendsDoesNot) {
  const riva::RecognitionConfig pcm = Config("speech_short", nvidia::riva::LINEAR_PCM, 16000);
  // The client sends its config, then nothing, and keeps the stream open.
  grpc::ClientContext context;
  context.set_deadline(In(60));
  auto stream = riva_->StreamingRecognize(&context);
  riva::StreamingRecognizeRequest first;
  *first.mutable_streaming_config()->mutable_config() = pcm;
  ASSERT_TRUE(stream->Write(first));
  riva::StreamingRecognizeResponse response;
  while (stream->Read(&response)) {
  }
  const grpc::Status idle = stream->Finish();
  EXPECT_EQ(idle.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << idle.error_message();
  EXPECT_THAT(idle.error_message(), HasSubstr("voice.stream_idle_timeout_ms"));
  // 0.5 s gaps, 3 s in all: longer than the 1.5 s timeout, but never silent for it.
  std::vector<std::string> chunks(6, Pcm16(0.1));
  const grpc::Status talking = Stream(pcm, chunks, 60, std::chrono::milliseconds(500));
  EXPECT_TRUE(talking.ok()) << talking.error_message();
}

// The contract (server/voice/riva_streaming.h): a window the model refuses ends its stream with the model's code.
TEST_F(RivaLimitsTest, AWindowTheModelRefusesEndsItsStreamWithResourceExhausted) {
  constexpr int kStreams = 8;
  const riva::RecognitionConfig pcm = Config("speech_tiny_queue", nvidia::riva::LINEAR_PCM, 16000);
  std::vector<grpc::Status> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) threads.emplace_back([&, i] { results[i] = Stream(pcm, {Pcm16(2.0)}, 60); });
  for (std::thread& t : threads) t.join();
  int refused = 0;
  for (const grpc::Status& s : results) {
    if (s.ok()) continue;
    ++refused;
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_THAT(s.error_message(), AllOf(HasSubstr("refused a window of this stream"), HasSubstr("reconnect")));
  }
  // One window runs (300 ms) and one waits: of 8 streams sent at once, most are refused.
  EXPECT_GE(refused, 1);
  EXPECT_TRUE(Stream(Config("speech_short", nvidia::riva::LINEAR_PCM, 16000), {Pcm16(1.0)}, 60).ok());
}

TEST_F(RivaLimitsTest, TheDefaultSpeechModelComesFromTheServerConfig) {
  riva::RivaSpeechRecognitionConfigRequest request;
  riva::RivaSpeechRecognitionConfigResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(riva_->GetRivaSpeechRecognitionConfig(&context, request, &response).ok());
  ASSERT_EQ(response.model_config_size(), 3);
  for (const auto& model : response.model_config()) {
    EXPECT_EQ(model.parameters().at("default"), model.model_name() == "speech_long" ? "true" : "false")
        << model.model_name();
  }
  const int64_t before = Rows("speech_long");
  ASSERT_TRUE(Recognize(Config("", nvidia::riva::LINEAR_PCM, 16000), Pcm16(1.0), 30).ok());
  EXPECT_EQ(Rows("speech_long"), before + 1);
}

// voice.default_model is checked once the models load: a name that is not a served speech model stops the start.
TEST(RivaDefaultModelTest, AServerWhoseDefaultIsNotAServedSpeechModelDoesNotStart) {
  for (const auto& [name, why] : std::vector<std::pair<std::string, std::string>>{
           {"no_such_model", "unknown speech model 'no_such_model'"}, {"generic_sim", "served but not as speech"}}) {
    ServerProcess server("voice:\n  default_model: " + name + "\n", {}, repository.path());
    EXPECT_FALSE(server.ready());
    EXPECT_EQ(server.WaitExit(std::chrono::seconds(60)), 1) << server.Log();
    EXPECT_THAT(server.Log(), AllOf(HasSubstr("server.yaml:"), HasSubstr(":18: voice.default_model: must name a "
                                                                         "served speech model"),
                                    HasSubstr(why)));
  }
}

// Issue 23: `model: llama_tiny` answered NOT_FOUND "unknown speech model" though it is served.
TEST_F(RivaLimitsTest, AGenerationModelIsServedButNotASpeechModel) {
  for (const std::string& model : {"gen_sim", "generic_sim", "no_such_model"}) {
    const grpc::Status s = Recognize(Config(model, nvidia::riva::LINEAR_PCM, 16000), Pcm16(1.0), 30);
    const std::string listed = "speech models: speech_long, speech_short, speech_tiny_queue";
    if (model == "gen_sim") {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
      EXPECT_THAT(s.error_message(), AllOf(HasSubstr("'gen_sim' is served but is a text-generation model"),
                                           HasSubstr(listed)));
    } else if (model == "generic_sim") {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
      EXPECT_THAT(s.error_message(), AllOf(HasSubstr("served but not as speech"), HasSubstr(listed)));
    } else {
      EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
      EXPECT_THAT(s.error_message(), AllOf(HasSubstr("unknown speech model 'no_such_model'"), HasSubstr(listed)));
    }
  }
}

// The example config's choice: the trained asr_digits, though asr_ctc comes first in name order.
TEST(RivaExampleModelsTest, TheConfiguredDefaultIsUsedForAnEmptyModelName) {
  ServerProcess server("voice: {default_model: asr_digits}\n", {"asr_ctc", "asr_digits"});
  ASSERT_TRUE(server.ready()) << server.Log();
  auto channel = grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials());
  auto stub = riva::RivaSpeechRecognition::NewStub(channel);
  riva::RivaSpeechRecognitionConfigResponse config;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->GetRivaSpeechRecognitionConfig(&context, {}, &config).ok());
  ASSERT_EQ(config.model_config_size(), 2);
  for (const auto& model : config.model_config()) {
    EXPECT_EQ(model.parameters().at("default"), model.model_name() == "asr_digits" ? "true" : "false");
  }
  auto kserve = inference::GRPCInferenceService::NewStub(channel);
  const auto rows = [&] {
    grpc::ClientContext c;
    inference::ModelStatisticsRequest request;
    request.set_name("asr_digits");
    inference::ModelStatisticsResponse response;
    EXPECT_TRUE(kserve->ModelStatistics(&c, request, &response).ok());
    return response.model_stats(0).inference_count();
  };
  const auto before = rows();
  riva::RecognizeRequest request;
  *request.mutable_config() = Config("", nvidia::riva::LINEAR_PCM, 16000);
  request.set_audio(Pcm16(1.0));
  riva::RecognizeResponse response;
  grpc::ClientContext recognize;
  ASSERT_TRUE(stub->Recognize(&recognize, request, &response).ok());
  EXPECT_EQ(rows(), before + 1);
}

}  // namespace
}  // namespace sluice
