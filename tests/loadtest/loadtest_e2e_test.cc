// sluice-loadtest end to end: the real sluice-server process on 127.0.0.1 serving `sim` models (written by the
// test into SLUICE_MODELS_DIR), driven by the real sluice-loadtest binary. Checks counts, the open-loop rate,
// JSON fields, recordings from a folder, SLO exit codes, errors by code, --compare, a sweep, --verify catching
// wrong outputs (the sim text_embed answers with row lengths, not the reference set's embeddings), --dry-run's
// padding plan, the same load against sluice-echo-server (the transport benchmark's baseline), and --protocol
// http reporting what gRPC reports.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>
#include <rapidjson/pointer.h>
#include <sndfile.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/server/server_process.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

void WriteSimRepository() {
  const std::filesystem::path root = SLUICE_MODELS_DIR;
  std::filesystem::create_directories(root / "asr_ctc");
  std::filesystem::create_directories(root / "text_embed");
  std::ofstream(root / "asr_ctc" / "config.yaml")
      << "name: asr_ctc\nkind: speech\n"
         "inputs:\n  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}\n"
         "outputs:\n  - {name: log_probs, dtype: FP32, shape: [-1, 29]}\n"
         "buckets: {lengths: [16000, 32000, 64000, 128000, 256000], batch_sizes: [1, 2, 4, 8]}\n"
         "batching: {max_queue_delay_ms: 5, max_queue_size: 256}\n"
         "instances: [{count: 1, device: sim}]\n"
         "sim: {base_ms: 2, per_sample_us: 0.001, output_steps_per_input_step: 0.01}\n";
  std::ofstream(root / "text_embed" / "config.yaml")
      << "name: text_embed\nkind: text\n"
         "inputs:\n  - {name: input_ids, dtype: INT64, shape: [-1]}\n"
         "outputs:\n  - {name: embedding, dtype: FP32, shape: [256]}\n"
         "buckets: {lengths: [32, 64, 128, 256, 512], batch_sizes: [1, 4, 8]}\n"
         "batching: {max_queue_delay_ms: 5, max_queue_size: 256}\n"
         "instances: [{count: 1, device: sim}]\n"
         "sim: {base_ms: 1, per_sample_us: 0.01, output_steps_per_input_step: 1}\n";
}

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

class LoadtestE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    WriteSimRepository();
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(server_->ready()) << server_->Log();
  }
  static void TearDownTestSuite() { delete server_; }

  static std::string Path(const std::string& name) { return (server_->dir() / name).string(); }

  // Runs sluice-loadtest against the server with `args` (plus --no-progress).
  static Result Run(const std::string& args, bool with_target = true) {
    std::string command = std::string(SLUICE_LOADTEST_BINARY) + " --no-progress ";
    if (with_target) {
      command += "-u " + server_->grpc_address() + " --metrics-url http://" + server_->http_address() + "/metrics ";
      if (args.find("--model-repository") == std::string::npos) {
        command += std::string("--model-repository ") + SLUICE_MODELS_DIR + " ";
      }
    }
    command += args + " 2>&1";
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
};

TEST_F(LoadtestE2eTest, ClosedLoopSendsExactlyTheRequestedCount) {
  const std::string json = Path("closed.json");
  Result r = Run("-m asr_ctc:0.7,text_embed:0.3 -c 4 -n 200 --warmup-requests 20 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("closed loop, concurrency 4"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/requests"), 200);
  EXPECT_EQ(Number(doc, "/results/ok"), 200);
  EXPECT_EQ(Number(doc, "/results/errors"), 0);
  EXPECT_EQ(Number(doc, "/per_model/0/requests") + Number(doc, "/per_model/1/requests"), 200);
  EXPECT_GT(Number(doc, "/per_model/0/requests"), Number(doc, "/per_model/1/requests"));  // 70/30 mix
  EXPECT_GT(Number(doc, "/results/audio_s_per_s"), 0);
  EXPECT_GT(Number(doc, "/results/tokens"), 0);
  EXPECT_EQ(std::string(doc["run"]["stop_reason"].GetString()), "requests");
  // The server's figures start when warm-up ends: the 200 measured rows, plus at most the 3 warm-up rows still
  // in flight then (ModelStatistics over gRPC).
  const double rows = Number(doc, "/server/model_stats/0/inferences") + Number(doc, "/server/model_stats/1/inferences");
  EXPECT_GE(rows, 200);
  EXPECT_LE(rows, 203);
  // /metrics: scraped when the server serves it, else the reason is reported; never a failure.
  const rapidjson::Value* scraped = rapidjson::Pointer("/server/metrics_scraped").Get(doc);
  ASSERT_NE(scraped, nullptr);
  if (!scraped->GetBool()) {
    EXPECT_NE(rapidjson::Pointer("/server/metrics_error").Get(doc), nullptr);
  }
}

TEST_F(LoadtestE2eTest, OpenLoopDeliversTheRateWithinTwentyPercent) {
  const std::string json = Path("open.json");
  Result r = Run("-m text_embed -r 80 -d 3 --warmup 0.5 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(std::string(doc["run"]["mode"].GetString()), "open");
  EXPECT_EQ(std::string(doc["run"]["arrival"].GetString()), "poisson");
  EXPECT_NEAR(Number(doc, "/results/req_per_s"), 80, 16);
  EXPECT_EQ(Number(doc, "/results/errors"), 0);
}

TEST_F(LoadtestE2eTest, GammaArrivalsAndFixedLengths) {
  const std::string json = Path("gamma.json");
  Result r = Run("-m asr_ctc --lengths fixed:1s -r 40 --burstiness 0.5 -n 60 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(std::string(doc["run"]["arrival"].GetString()), "gamma");
  EXPECT_EQ(Number(doc, "/results/requests"), 60);
  EXPECT_NEAR(Number(doc, "/results/audio_seconds"), 60.0, 1e-9);  // 60 requests of exactly 1 s
}

TEST_F(LoadtestE2eTest, RecordingsFromAFolder) {
  const std::filesystem::path dir = Path("wav");
  std::filesystem::create_directories(dir);
  for (const char* name : {"a.wav", "b.wav", "c.wav"}) {  // 1.5 s each, 16 kHz mono
    SF_INFO info{};
    info.samplerate = 16000;
    info.channels = 1;
    info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    SNDFILE* file = sf_open((dir / name).c_str(), SFM_WRITE, &info);
    ASSERT_NE(file, nullptr);
    std::vector<float> samples(24000, 0.05f);
    sf_writef_float(file, samples.data(), samples.size());
    sf_close(file);
  }
  const std::string json = Path("wav.json");
  Result r = Run("-m asr_ctc --audio-dir " + dir.string() + " -c 2 -n 30 --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("3 clips"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/ok"), 30);
  EXPECT_NEAR(Number(doc, "/results/audio_seconds"), 45.0, 1e-9);
}

TEST_F(LoadtestE2eTest, SloVerdictsDecideTheExitCode) {
  const std::string loose = Path("loose.yaml"), strict = Path("strict.yaml");
  std::ofstream(loose) << "latency_ms: {p99: 5000}\nmax_error_rate: 0.0\nmin_throughput_rps: 1\n"
                          "request: {latency_ms: 5000}\n";
  std::ofstream(strict) << "latency_ms: {p50: 0.001}\n";
  Result pass = Run("-m text_embed -c 2 -n 30 --slo " + loose);
  EXPECT_EQ(pass.exit_code, 0) << pass.output;
  EXPECT_THAT(pass.output, HasSubstr("SLO PASS"));
  Result fail = Run("-m text_embed -c 2 -n 30 --slo " + strict);
  EXPECT_EQ(fail.exit_code, 1) << fail.output;
  EXPECT_THAT(fail.output, HasSubstr("FAIL  p50 latency (ms)"));
  std::ofstream(strict) << "latency_ms: {p42: 1}\n";
  Result typo = Run("-m text_embed -c 2 -n 30 --slo " + strict);
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_THAT(typo.output, HasSubstr("p42"));
}

TEST_F(LoadtestE2eTest, DeadlinesAreCountedByCode) {
  const std::string json = Path("deadline.json");
  // 16 s of audio costs the sim ~2.3 ms + batching delay; a 1 ms deadline cannot be met.
  Result r = Run("-m asr_ctc --lengths fixed:16s -c 2 -n 20 --timeout-ms 1 --json " + json);
  ASSERT_EQ(r.exit_code, 3) << r.output;  // no request succeeded: exit 3, with the first error's message
  EXPECT_THAT(r.output, HasSubstr("DEADLINE_EXCEEDED"));
  EXPECT_THAT(r.output, HasSubstr("no request succeeded (20 errors); first DEADLINE_EXCEEDED: "));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/errors_by_code/DEADLINE_EXCEEDED"), 20);
  EXPECT_EQ(Number(doc, "/results/error_rate"), 1.0);
}

TEST_F(LoadtestE2eTest, CompareShowsTwoRunsSideBySide) {
  const std::string a = Path("c1.json"), b = Path("c8.json");
  ASSERT_EQ(Run("-m asr_ctc -c 1 -n 40 --json " + a).exit_code, 0);
  ASSERT_EQ(Run("-m asr_ctc -c 8 -n 80 --pricing " SLUICE_PRICING_YAML " --preset inf2.xlarge --json " + b).exit_code,
            0);
  Result r = Run("--compare " + a + " " + b, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("concurrency 1"));
  EXPECT_THAT(r.output, HasSubstr("concurrency 8"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("throughput \\(req/s\\) +[0-9.]+ +[0-9.]+ +[0-9.]+ +[AB=]"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("\\$ per 1k successful +- +[0-9.]+"));
  EXPECT_EQ(Run("--compare " + a + " /nonexistent.json", false).exit_code, 2);
}

TEST_F(LoadtestE2eTest, SweepFindsTheHighestPassingConcurrency) {
  const std::string json = Path("sweep.json"), svg = Path("sweep.svg");
  Result r = Run("-m text_embed --sweep concurrency --sweep-levels 1,2,4 -n 40 --json " + json + " --plot " + svg);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("highest throughput meeting the SLO"));
  rapidjson::Document doc = Json(json);
  ASSERT_TRUE(doc.HasMember("sweep"));
  EXPECT_EQ(doc["sweep"]["steps"].Size(), 3u);
  EXPECT_GT(Number(doc, "/sweep/best_req_per_s"), 0);
  std::ifstream in(svg);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_THAT(text, HasSubstr("Sweep over concurrency"));
}

TEST_F(LoadtestE2eTest, VerifyCatchesWrongOutputs) {
  // The sim text_embed answers every element with the row's length; the reference set holds real embeddings.
  const std::string json = Path("verify.json");
  Result r = Run("-m text_embed --verify --model-repository " SLUICE_REAL_MODELS_DIR " --json " + json);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("verify text_embed: FAIL"));
  rapidjson::Document doc = Json(json);
  EXPECT_GT(Number(doc, "/verify/0/cases"), 0);
  EXPECT_EQ(Number(doc, "/verify/0/mismatched_cases"), Number(doc, "/verify/0/cases"));
  EXPECT_GT(Number(doc, "/verify/0/max_abs_error"), 1.0);
}

TEST_F(LoadtestE2eTest, DryRunPrintsThePaddingPlanWithoutSending) {
  const std::string json = Path("plan.json");
  Result r = Run("-m asr_ctc --lengths fixed:20000 -n 10 --dry-run --json " + json);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("padding efficiency (real / padded steps): buckets 62.5 %, pad-to-max (256000) 7.8 %"));
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/models/0/requests"), 10);
  EXPECT_EQ(Number(doc, "/models/0/buckets/1/length"), 32000);
  EXPECT_EQ(Number(doc, "/models/0/buckets/1/requests"), 10);
  EXPECT_DOUBLE_EQ(Number(doc, "/models/0/efficiency"), 20000.0 / 32000);
  EXPECT_DOUBLE_EQ(Number(doc, "/models/0/pad_to_max_efficiency"), 20000.0 / 256000);
  EXPECT_DOUBLE_EQ(Number(doc, "/models/0/audio_seconds"), 12.5);
}

// sluice-echo-server on the sim asr_ctc's config: the load generator asks it about the model and drives it as it
// drives sluice-server.
TEST_F(LoadtestE2eTest, EchoServerTakesTheSameLoad) {
  const std::string log = Path("echo.log");
  const std::string model_dir = std::string(SLUICE_MODELS_DIR) + "/asr_ctc";
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(log_fd, 1);
    ::dup2(log_fd, 2);
    ::execl(SLUICE_ECHO_BINARY, SLUICE_ECHO_BINARY, "--model", model_dir.c_str(), (char*)nullptr);
    ::_exit(127);
  }
  ::close(log_fd);
  std::string address;
  for (int i = 0; i < 600 && address.empty(); ++i) {
    std::ifstream in(log);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    const size_t at = text.find("READY grpc=");
    const size_t end = at == std::string::npos ? at : text.find('\n', at);
    if (end != std::string::npos) address = text.substr(at + 11, end - at - 11);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_FALSE(address.empty());
  const std::string json = Path("echo.json");
  Result r = Run("-u " + address + " --metrics-url none --model-repository " SLUICE_MODELS_DIR
                 " -m asr_ctc -c 2 -n 40 --json " + json, false);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  rapidjson::Document doc = Json(json);
  EXPECT_EQ(Number(doc, "/results/ok"), 40);
  EXPECT_GT(Number(doc, "/results/audio_seconds"), 0);  // asked for the model's kind: speech
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(Run("-u " + address + " -m asr_ctc -c 1 -n 1", false).exit_code, 3);  // it has stopped
}

// --protocol http: the same seeded requests over KServe v2 REST (binary data) give the same counts, lengths and
// per-model split as over gRPC; the server's figures come over HTTP too; deadlines and unknown models keep their
// codes; --verify decodes HTTP outputs (and catches the sim's wrong ones).
TEST_F(LoadtestE2eTest, HttpProtocolReportsWhatGrpcReports) {
  const std::string grpc_json = Path("proto_grpc.json"), http_json = Path("proto_http.json");
  const std::string mix = "-m asr_ctc:0.7,text_embed:0.3 -c 4 -n 120 --warmup-requests 10 --seed 9 --json ";
  ASSERT_EQ(Run(mix + grpc_json).exit_code, 0);
  const std::string http = "--protocol http -u " + server_->http_address() +
                           " --model-repository " SLUICE_MODELS_DIR " ";
  Result r = Run(http + mix + http_json, false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sluice-loadtest http://"));
  rapidjson::Document g = Json(grpc_json), h = Json(http_json);
  EXPECT_EQ(Number(h, "/results/ok"), 120);
  EXPECT_EQ(Number(h, "/results/errors"), 0);
  for (const char* field : {"/per_model/0/requests", "/per_model/1/requests", "/results/audio_seconds",
                            "/results/tokens"}) {
    EXPECT_EQ(Number(h, field), Number(g, field)) << field;
  }
  // ModelStatistics over GET /v2/models/{m}/stats; /metrics on the same port ("auto").
  const double rows = Number(h, "/server/model_stats/0/inferences") + Number(h, "/server/model_stats/1/inferences");
  EXPECT_GE(rows, 120);
  EXPECT_LE(rows, 123);
  EXPECT_TRUE(rapidjson::Pointer("/server/metrics_scraped").Get(h)->GetBool());

  const std::string deadline_json = Path("http_deadline.json");
  r = Run(http + "-m asr_ctc --lengths fixed:16s -c 2 -n 10 --timeout-ms 1 --json " + deadline_json, false);
  ASSERT_EQ(r.exit_code, 3) << r.output;  // nothing succeeded
  EXPECT_EQ(Number(Json(deadline_json), "/results/errors_by_code/DEADLINE_EXCEEDED"), 10) << r.output;
  EXPECT_EQ(Run(http + "-m no_such_model -c 1 -n 1", false).exit_code, 3);

  r = Run("--protocol http -u " + server_->http_address() + " -m text_embed --verify --model-repository "
          SLUICE_REAL_MODELS_DIR, false);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("verify text_embed: FAIL"));
  EXPECT_THAT(r.output, HasSubstr("(0 failed calls)"));
}

TEST_F(LoadtestE2eTest, UsageAndServerErrorsHaveTheirExitCodes) {
  EXPECT_EQ(Run("-m no_such_model -c 1 -n 1").exit_code, 3);
  EXPECT_EQ(Run("-m text_embed -c 1 -r 5 -n 1").exit_code, 2);
  EXPECT_EQ(Run("-m text_embed").exit_code, 2);
  EXPECT_EQ(Run("-m text_embed -c 1 -n 1 --lengths zipf:2").exit_code, 2);
  EXPECT_EQ(Run("-m text_embed -c 1 -n 1 --preset inf2.xlarge").exit_code, 2);  // --pricing missing
}

}  // namespace
}  // namespace sluice
