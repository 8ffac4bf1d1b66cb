// sluice-loadtest's Riva speech APIs end to end: the real sluice-server on 127.0.0.1 serving the exported
// asr_ctc (random weights, a `speech:` section), driven by the real sluice-loadtest binary with --api
// riva-offline and riva-streaming. Checks counts, real-time pacing, that chunk, final and first-result
// latencies were measured for every chunk and stream, RTFx, WER from a temporary audio folder with reference
// transcripts (the model's own transcript of a.wav, got by a first Recognize call, gives WER 0; a wrong
// reference for b.wav gives WER > 0), SLO exit codes on chunk latency, the streams sweep and usage errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <grpcpp/grpcpp.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <sndfile.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/ascii.h"
#include "loadtest/core/audio_folder.h"
#include "loadtest/speech/speech_audio.h"
#include "loadtest/speech/wer.h"
#include "riva/proto/riva_asr.grpc.pb.h"
#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
namespace riva = nvidia::riva::asr;

// 2 s at 16 kHz: a few tones that change every 250 ms plus noise, at speech-like level; `seed` varies them.
void WriteRecording(const std::filesystem::path& path, int seed) {
  std::vector<float> samples(32000);
  uint32_t noise = 12345u + seed;
  for (size_t i = 0; i < samples.size(); ++i) {
    const double t = static_cast<double>(i) / 16000;
    const double f = 200.0 + 150.0 * ((i / 4000 + seed) % 5);
    noise = noise * 1664525u + 1013904223u;
    samples[i] = static_cast<float>(0.2 * std::sin(2 * M_PI * f * t) + 0.1 * std::sin(2 * M_PI * 3.1 * f * t) +
                                    0.05 * (static_cast<double>(noise >> 8) / (1 << 24) - 0.5));
  }
  SF_INFO info{};
  info.samplerate = 16000;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr);
  sf_write_float(file, samples.data(), static_cast<sf_count_t>(samples.size()));
  sf_close(file);
}

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

class SpeechE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess("", {"asr_ctc"});
    ASSERT_TRUE(server_->ready()) << server_->Log();
    // one/: a.wav with the model's own transcript as reference; two/: that, and b.wav with a wrong one.
    const std::filesystem::path one = server_->dir() / "one", two = server_->dir() / "two";
    std::filesystem::create_directories(one);
    std::filesystem::create_directories(two);
    WriteRecording(one / "a.wav", 0);
    WriteRecording(two / "a.wav", 0);
    WriteRecording(two / "b.wav", 3);
    transcript_ = RecognizeAsTheLoadtestSends(one);
    // Upper case and punctuation: the WER normalises both away.
    const std::string reference = absl::AsciiStrToUpper(transcript_) + ".";
    std::ofstream(one / "a.txt") << reference << "\n";
    std::ofstream(two / "a.txt") << reference << "\n";
    std::ofstream(two / "b.txt") << "this reference is certainly wrong\n";
  }
  static void TearDownTestSuite() { delete server_; }

  // One Recognize call with the very WAV bytes riva-offline sends for the folder's first recording.
  static std::string RecognizeAsTheLoadtestSends(const std::filesystem::path& folder) {
    absl::StatusOr<loadtest::AudioFolder> audio = loadtest::LoadAudioFolder(folder.string(), 16000, 256000);
    EXPECT_TRUE(audio.ok()) << audio.status();
    if (!audio.ok()) return "";
    absl::StatusOr<std::string> wav = loadtest::EncodeWav(audio->clips[0].samples, 16000);
    EXPECT_TRUE(wav.ok());
    auto stub = riva::RivaSpeechRecognition::NewStub(
        grpc::CreateChannel(server_->grpc_address(), grpc::InsecureChannelCredentials()));
    riva::RecognizeRequest request;
    request.mutable_config()->set_encoding(nvidia::riva::LINEAR_PCM);
    request.mutable_config()->set_sample_rate_hertz(16000);
    request.mutable_config()->set_model("asr_ctc");
    request.set_audio(*wav);
    riva::RecognizeResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    const grpc::Status status = stub->Recognize(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.results_size() > 0 && response.results(0).alternatives_size() > 0
               ? response.results(0).alternatives(0).transcript()
               : "";
  }

  static std::string Path(const std::string& name) { return (server_->dir() / name).string(); }

  static std::string WriteFile(const std::string& name, const std::string& text) {
    std::ofstream(Path(name)) << text;
    return Path(name);
  }

  static Result Run(const std::string& args) {
    const std::string command = std::string(SLUICE_LOADTEST_BINARY) + " --no-progress -u " +
                                server_->grpc_address() + " --metrics-url http://" + server_->http_address() +
                                "/metrics --model-repository " + SLUICE_MODELS_DIR + " -m asr_ctc " + args + " 2>&1";
    Result result;
    FILE* pipe = ::popen(command.c_str(), "r");
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
  }

  static rapidjson::Document Json(const std::string& path) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    rapidjson::Document doc;
    doc.Parse(text.c_str());
    EXPECT_FALSE(doc.HasParseError()) << path;
    return doc;
  }

  static double Number(const rapidjson::Document& doc, const char* pointer) {
    const rapidjson::Value* v = rapidjson::Pointer(pointer).Get(doc);
    EXPECT_NE(v, nullptr) << pointer;
    return v != nullptr && v->IsNumber() ? v->GetDouble() : NAN;
  }

  static inline testing::ServerProcess* server_ = nullptr;
  static inline std::string transcript_;
};

TEST_F(SpeechE2eTest, OfflineRecognizeWithOwnTranscriptHasZeroWer) {
  ASSERT_FALSE(loadtest::NormalizeWords(transcript_).empty()) << "the model transcribed a.wav as nothing";
  const std::string json = Path("offline.json");
  Result r = Run("--api riva-offline -c 2 -n 6 --audio-dir " + Path("one") + " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Riva Recognize, closed loop, concurrency 2"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(std::string(doc["config"]["api"].GetString()), "riva-offline");
  EXPECT_EQ(Number(doc, "/results/requests"), 6);
  EXPECT_EQ(Number(doc, "/results/ok"), 6);
  EXPECT_EQ(Number(doc, "/results/latency_ms/count"), 6);
  EXPECT_DOUBLE_EQ(Number(doc, "/results/speech/audio_seconds"), 12);
  EXPECT_GT(Number(doc, "/results/speech/rtfx"), 0);
  EXPECT_EQ(Number(doc, "/results/speech/wer/scored"), 6);
  EXPECT_EQ(Number(doc, "/results/speech/wer/reference_words"),
            6.0 * loadtest::NormalizeWords(transcript_).size());
  EXPECT_EQ(Number(doc, "/results/speech/wer/wer"), 0) << r.output;
  // The server counted the windows: 6 rows, one per 2 s file.
  EXPECT_GE(Number(doc, "/server/model_stats/0/inferences"), 6);
}

TEST_F(SpeechE2eTest, OfflineWrongReferenceAndSyntheticLengths) {
  const std::string json = Path("offline_wrong.json");
  Result r = Run("--api riva-offline -c 2 -n 8 --audio-dir " + Path("two") + " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/ok"), 8);
  EXPECT_GT(Number(doc, "/results/speech/wer/wer"), 0);
  EXPECT_GT(Number(doc, "/results/speech/wer/errors"), 0);
  EXPECT_THAT(r.output, HasSubstr("WER "));

  // Generated noise of fixed lengths (no references: no WER), open loop.
  const std::string synthetic = Path("offline_synthetic.json");
  r = Run("--api riva-offline -r 20 -n 4 --lengths fixed:1s --json " + synthetic);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  doc = Json(synthetic);
  EXPECT_EQ(Number(doc, "/results/ok"), 4);
  EXPECT_DOUBLE_EQ(Number(doc, "/results/speech/audio_seconds"), 4);
  EXPECT_EQ(rapidjson::Pointer("/results/speech/wer").Get(doc), nullptr);
}

TEST_F(SpeechE2eTest, StreamingAtRealTimeMeasuresEveryChunk) {
  const std::string json = Path("streaming.json");
  const std::string slo = WriteFile("pass.yaml", "chunk_latency_ms: {p95: 60000}\nfinal_latency_ms: {p99: 60000}\n");
  Result r = Run("--api riva-streaming --streams 4 -n 4 --audio-dir " + Path("two") + " --slo " + slo + " --json " +
                 json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Riva StreamingRecognize, 4 streams, 100 ms chunks at real time"));
  EXPECT_THAT(r.output, HasSubstr("SLO PASS"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/requests"), 4);
  EXPECT_EQ(Number(doc, "/results/ok"), 4);
  EXPECT_EQ(Number(doc, "/results/speech/streams"), 4);
  // Each 2 s recording is 20 chunks of 100 ms, every one answered by a result covering it.
  EXPECT_EQ(Number(doc, "/results/speech/chunks"), 80);
  EXPECT_EQ(Number(doc, "/results/speech/chunks_unanswered"), 0);
  EXPECT_EQ(Number(doc, "/results/speech/chunk_latency_ms/count"), 80);
  EXPECT_GT(Number(doc, "/results/speech/chunk_latency_ms/p50"), 0);
  EXPECT_EQ(Number(doc, "/results/speech/final_latency_ms/count"), 4);
  EXPECT_EQ(Number(doc, "/results/speech/first_result_ms/count"), 4);
  EXPECT_GT(Number(doc, "/results/speech/rtfx"), 0);
  EXPECT_DOUBLE_EQ(Number(doc, "/results/speech/audio_seconds"), 8);
  // Real time: the last chunk of a 2 s recording goes 1.9 s after the first.
  EXPECT_GE(Number(doc, "/results/latency_ms/min"), 1900);
  EXPECT_GE(Number(doc, "/run/window_s"), 1.9);
  EXPECT_EQ(Number(doc, "/results/speech/wer/scored"), 4);
  EXPECT_GE(Number(doc, "/results/speech/wer/wer"), 0);
}

TEST_F(SpeechE2eTest, ChunkLatencySloDecidesTheExitCode) {
  const std::string slo = WriteFile("fail.yaml", "chunk_latency_ms: {p95: 1}\n");
  Result r = Run("--api riva-streaming --streams 1 -n 1 --lengths fixed:1s --no-realtime --slo " + slo);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("FAIL  p95 chunk latency (ms)"));
}

TEST_F(SpeechE2eTest, SweepOverStreamsNamesTheMostThatHoldTheSlo) {
  const std::string json = Path("sweep.json");
  const std::string slo = WriteFile("sweep.yaml", "chunk_latency_ms: {p95: 60000}\nmax_error_rate: 0\n");
  Result r = Run("--api riva-streaming --sweep streams --sweep-levels 1,2 -n 2 --lengths fixed:1s --slo " + slo +
                 " --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("most streams meeting the SLO: 2"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/sweep/best_level"), 2);
  EXPECT_EQ(Number(doc, "/sweep/steps/1/speech/streams"), 2);
}

TEST_F(SpeechE2eTest, UsageErrors) {
  Result r = Run("--api riva-streaming -c 2 -n 1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, HasSubstr("--streams"));
  EXPECT_EQ(Run("--api riva-offline --sweep streams -n 1").exit_code, 2);
}

}  // namespace
}  // namespace sluice
