// sluice-advisor's traffic inputs: a server's sluice_request_length histogram (parsed, and from --metrics-file and
// --metrics-url end to end), weighted lengths against the same lengths one by one, and a folder of recordings.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sndfile.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <random>
#include <thread>

#include "loadtest/advisor/advisor.h"
#include "loadtest/advisor/audio_lengths.h"
#include "loadtest/advisor/metrics_lengths.h"
#include "tests/loadtest/advisor_cli.h"

namespace sluice::advisor {

bool operator==(const LengthCount& x, const LengthCount& y) { return x.length == y.length && x.count == y.count; }
void PrintTo(const LengthCount& c, std::ostream* os) { *os << "{" << c.length << ", " << c.count << "}"; }

namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// One model's sluice_request_length series as sluice-server writes them: cumulative buckets, +Inf, _count, _sum.
std::string HistogramText(const std::string& model, const std::vector<int64_t>& boundaries,
                          const std::vector<int64_t>& lengths) {
  std::string text;
  int64_t sum = 0;
  for (int64_t l : lengths) sum += l;
  const std::string labels = "model=\"" + model + "\"";
  text += "sluice_request_length_count{" + labels + "} " + std::to_string(lengths.size()) + "\n";
  text += "sluice_request_length_sum{" + labels + "} " + std::to_string(sum) + "\n";
  for (int64_t b : boundaries) {
    int64_t cumulative = 0;
    for (int64_t l : lengths) cumulative += l <= b ? 1 : 0;
    text += "sluice_request_length_bucket{" + labels + ",le=\"" + std::to_string(b) + "\"} " +
            std::to_string(cumulative) + "\n";
  }
  text += "sluice_request_length_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(lengths.size()) + "\n";
  return text;
}

const char kHeader[] =
    "# HELP sluice_request_length Real length of each request offered to the scheduler\n"
    "# TYPE sluice_request_length histogram\n";

TEST(MetricsLengths, CumulativeBucketsBecomeCountsAtEachUpperBound) {
  const std::string text = std::string(kHeader) + HistogramText("asr", {1, 50, 100, 500, 1000},
                                                                 {95, 100, 100, 990, 1000, 20});
  absl::StatusOr<HistogramLengths> h = LengthsFromMetricsText(text, "", "m.txt");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->model, "asr");
  EXPECT_THAT(h->counts, ElementsAre(LengthCount{50, 1}, LengthCount{100, 3}, LengthCount{1000, 2}));
  EXPECT_EQ(h->requests, 6);
  EXPECT_EQ(h->beyond_largest, 0);
  EXPECT_EQ(h->boundaries, 5);
  EXPECT_EQ(h->largest_boundary, 1000);
  EXPECT_THAT(h->Describe("m.txt"), HasSubstr("sluice_request_length of model 'asr' in m.txt (5 boundaries up to 1000)"));
  ASSERT_EQ(h->Notes().size(), 2u);
  EXPECT_THAT(h->Notes()[0], HasSubstr("upper bound"));
  EXPECT_THAT(h->Notes()[1], HasSubstr("largest bucket (1000 here)"));
}

TEST(MetricsLengths, AFractionalBoundaryHoldsTheWholeLengthsBelowIt) {
  const std::string text = "sluice_request_length_bucket{le=\"2.5\"} 4\nsluice_request_length_bucket{le=\"7.9\"} 6\n";
  absl::StatusOr<HistogramLengths> h = LengthsFromMetricsText(text, "", "m");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->model, "");
  EXPECT_THAT(h->counts, ElementsAre(LengthCount{2, 4}, LengthCount{7, 2}));
}

TEST(MetricsLengths, RequestsOnlyInInfAreCountedApartAndLeftOut) {
  const std::string text = HistogramText("asr", {10, 100}, {5, 50, 50, 400, 900});
  absl::StatusOr<HistogramLengths> h = LengthsFromMetricsText(text, "asr", "m");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(h->counts, ElementsAre(LengthCount{10, 1}, LengthCount{100, 2}));
  EXPECT_EQ(h->requests, 3);
  EXPECT_EQ(h->beyond_largest, 2);
  ASSERT_EQ(h->Notes().size(), 3u);
  EXPECT_THAT(h->Notes()[2], HasSubstr("2 requests were counted only in +Inf, longer than the histogram's largest "
                                       "boundary 100"));

  absl::StatusOr<HistogramLengths> all_long = LengthsFromMetricsText(HistogramText("asr", {10}, {20, 30}), "", "m");
  ASSERT_FALSE(all_long.ok());
  EXPECT_THAT(all_long.status().message(), HasSubstr("every one of the 2 requests"));
}

TEST(MetricsLengths, SeveralModelsNeedANameAndAnUnknownNameListsThem) {
  const std::string text = std::string(kHeader) + HistogramText("asr", {100, 1000}, {100, 900}) +
                           HistogramText("embed", {8, 16}, {3, 16, 16});
  absl::StatusOr<HistogramLengths> none = LengthsFromMetricsText(text, "", "m.txt");
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("m.txt: sluice_request_length holds several models (asr, embed)"));
  EXPECT_THAT(none.status().message(), HasSubstr("--model"));
  absl::StatusOr<HistogramLengths> embed = LengthsFromMetricsText(text, "embed", "m.txt");
  ASSERT_TRUE(embed.ok()) << embed.status();
  EXPECT_THAT(embed->counts, ElementsAre(LengthCount{8, 1}, LengthCount{16, 2}));
  absl::StatusOr<HistogramLengths> other = LengthsFromMetricsText(text, "tts", "m.txt");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(other.status().message(), HasSubstr("has no model 'tts' (it has: asr, embed)"));
}

TEST(MetricsLengths, MissingEmptyOrMalformedHistogramsSayWhatIsWrong) {
  const std::string other = "# TYPE sluice_requests_total counter\nsluice_requests_total{model=\"asr\"} 3\n";
  EXPECT_THAT(LengthsFromMetricsText(other, "", "m").status().message(),
              HasSubstr("m: no sluice_request_length histogram"));
  EXPECT_THAT(LengthsFromMetricsText(HistogramText("asr", {10, 100}, {}), "", "m").status().message(),
              HasSubstr("sluice_request_length of model 'asr' is empty"));
  const std::string decreasing =
      "sluice_request_length_bucket{le=\"10\"} 5\nsluice_request_length_bucket{le=\"20\"} 3\n";
  EXPECT_THAT(LengthsFromMetricsText(decreasing, "", "m").status().message(), HasSubstr("counts decrease at le=\"20\""));
  EXPECT_THAT(LengthsFromMetricsText("sluice_request_length_bucket{le=\"x\"} 5\n", "", "m").status().message(),
              HasSubstr("le=\"x\", not a number"));
  EXPECT_THAT(LengthsFromMetricsText("sluice_request_length_bucket{le=\"5\" 5\n", "", "m").status().message(),
              HasSubstr("m: metrics line 1"));
}

TEST(WeightedLengths, CountedLengthsAdviseExactlyAsTheSameLengthsOneByOne) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 20; ++trial) {
    AdvisorInput counted, expanded;
    for (int i = 0; i < 40; ++i) {
      const int64_t length = 1 + static_cast<int64_t>(rng() % 3000);
      const int64_t count = static_cast<int64_t>(rng() % 6);  // zero counts too
      counted.counted.push_back({length, count});
      for (int64_t c = 0; c < count; ++c) expanded.lengths.push_back(length);
    }
    if (expanded.lengths.empty()) continue;
    for (AdvisorInput* in : {&counted, &expanded}) {
      in->cost = kDefaultCostModel;
      in->max_buckets = 1 + trial % 5;
      in->multiple_of = trial % 2 ? 16 : 1;
      in->max_candidates = trial % 3 ? 2000 : 7;
      in->clip_to = trial % 4 == 0 ? 2000 : 0;
      in->current = {500, 1000, 2500};
    }
    absl::StatusOr<Advice> a = Advise(counted);
    absl::StatusOr<Advice> b = Advise(expanded);
    ASSERT_TRUE(a.ok() && b.ok()) << "trial " << trial;
    EXPECT_EQ(a->bucket_lengths, b->bucket_lengths) << "trial " << trial;
    EXPECT_EQ(a->requests, b->requests);
    EXPECT_EQ(a->candidates, b->candidates);
    ASSERT_EQ(a->plans.size(), b->plans.size());
    for (size_t p = 0; p < a->plans.size(); ++p) {
      EXPECT_EQ(a->plans[p].requests, b->plans[p].requests);
      EXPECT_EQ(a->plans[p].refused, b->plans[p].refused);
      EXPECT_DOUBLE_EQ(a->plans[p].seconds_per_request, b->plans[p].seconds_per_request);
      EXPECT_DOUBLE_EQ(a->plans[p].efficiency(), b->plans[p].efficiency());
    }
  }
}

TEST(WeightedLengths, MillionsOfRequestsCostOneEntryPerLength) {
  AdvisorInput in;
  in.counted = {{100, 5'000'000'000}, {1000, 10}, {1000, 5}};
  in.cost = {0.001, 1e-6, 0};
  in.max_buckets = 2;
  in.lengths_notes = {"from a test"};
  absl::StatusOr<Advice> a = Advise(in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->requests, 5'000'000'015);
  EXPECT_THAT(a->bucket_lengths, ElementsAre(100, 1000));
  EXPECT_EQ(a->plans.front().buckets[1].requests, 15);
  EXPECT_EQ(a->notes.front(), "from a test");
  in.counted = {{100, 0}};
  EXPECT_FALSE(Advise(in).ok());
}

// --- recordings ---

void WriteWav(const std::filesystem::path& path, int sample_rate, int channels, int64_t frames) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr) << sf_strerror(nullptr);
  std::vector<float> samples(static_cast<size_t>(frames * channels), 0.25f);
  ASSERT_EQ(sf_writef_float(file, samples.data(), frames), frames);
  sf_close(file);
}

TEST(AudioLengths, ResamplingRoundsUp) {
  EXPECT_EQ(ResampledLength(441, 44100, 16000), 160);
  EXPECT_EQ(ResampledLength(442, 44100, 16000), 161);
  EXPECT_EQ(ResampledLength(1, 48000, 16000), 1);
  EXPECT_EQ(ResampledLength(4001, 8000, 16000), 8002);
  EXPECT_EQ(ResampledLength(12345, 16000, 16000), 12345);
}

class AudioLengthsTest : public AdvisorCliTest {};

TEST_F(AudioLengthsTest, EachRecordingAtTheModelsRateEmptyOnesSkipped) {
  WriteWav(dir_ / "a.wav", 16000, 1, 12000);
  WriteWav(dir_ / "b.wav", 8000, 2, 4001);
  WriteWav(dir_ / "c.wav", 16000, 1, 0);
  absl::StatusOr<AudioLengths> audio = LengthsFromAudioFolder(dir_.string(), 16000);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_THAT(audio->lengths, ElementsAre(12000, 8002));
  EXPECT_EQ(audio->resampled, 1);
  EXPECT_EQ(audio->empty, 1);
  EXPECT_THAT(audio->other_rates, ElementsAre(8000));
  EXPECT_THAT(audio->Describe("d", 16000), "2 recordings in d, in samples at 16000 Hz");
  ASSERT_EQ(audio->Notes(16000).size(), 2u);
  EXPECT_THAT(audio->Notes(16000)[0], HasSubstr("1 recordings at 8000 Hz count as their length resampled to 16000 Hz"));

  Write("a.txt", "the reference transcript of a.wav\n");  // text files are references or manifests, never audio
  Write("manifest.tsv", "a.wav\tthe reference\n");
  Write("notes.md", "not audio\n");
  EXPECT_TRUE(LengthsFromAudioFolder(dir_.string(), 16000).ok());
  Write("cover.jpg", "not audio\n");  // anything else libsndfile cannot read is an error naming it
  EXPECT_THAT(LengthsFromAudioFolder(dir_.string(), 16000).status().message(), HasSubstr("cover.jpg: not audio"));
  EXPECT_THAT(LengthsFromAudioFolder((dir_ / "missing").string(), 16000).status().message(),
              HasSubstr("audio folder"));
}

// --- the command line, end to end ---

const char kAsrConfig[] =
    "name: asr_ctc\nkind: speech\n"
    "inputs:\n  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}\n"
    "outputs:\n  - {name: log_probs, dtype: FP32, shape: [-1, 29]}\n"
    "buckets: {lengths: [16000, 32000], batch_sizes: [1, 2, 4, 8]}\n"
    "batching: {max_queue_delay_ms: 5, max_queue_size: 256}\n"
    "instances: [{count: 1, device: sim}]\n"
    "sim: {base_ms: 2, per_sample_us: 0.001, output_steps_per_input_step: 0.01}\n";

class AdvisorInputsCli : public AdvisorCliTest {
 protected:
  std::string AsrConfig() {
    std::filesystem::create_directories(dir_ / "asr_ctc");
    return Write("asr_ctc/config.yaml", kAsrConfig);
  }
  std::string TwoModelMetrics() {
    return Write("metrics.txt", std::string(kHeader) +
                                    HistogramText("asr_ctc", {4000, 8000, 16000, 32000},
                                                  {3000, 3000, 3900, 7000, 16000, 16000, 31000, 40000}) +
                                    HistogramText("text_embed", {32, 64}, {10, 60}));
  }
};

TEST_F(AdvisorInputsCli, MetricsFileGivesTheHistogramOfTheNamedOrConfiguredModel) {
  const std::string metrics = TwoModelMetrics();
  std::string output;
  ASSERT_EQ(Run("--metrics-file " + metrics + " --model asr_ctc --max-buckets 3 --cost-model 0.001,1e-7,0", &output), 0)
      << output;
  EXPECT_THAT(output, HasSubstr("buckets: {lengths: [4000, 16000, 32000]}"));
  EXPECT_THAT(output, HasSubstr("7 requests"));
  EXPECT_THAT(output, HasSubstr("lengths: sluice_request_length of model 'asr_ctc' in " + metrics));
  EXPECT_THAT(output, HasSubstr("upper bound"));
  EXPECT_THAT(output, HasSubstr("1 requests were counted only in +Inf"));

  // The model named by --model-config; its sample rate and current buckets come along.
  ASSERT_EQ(Run("--metrics-file " + metrics + " --model-config " + AsrConfig() + " --max-buckets 3", &output), 0)
      << output;
  EXPECT_THAT(output, HasSubstr("buckets: {lengths: [4000, 16000, 32000], batch_sizes: [1, 2, 4, 8]}"));
  EXPECT_THAT(output, HasSubstr("current"));
}

TEST_F(AdvisorInputsCli, MetricsErrorsExitTwoNamingTheFlag) {
  const std::string metrics = TwoModelMetrics();
  std::string output;
  EXPECT_EQ(Run("--metrics-file " + metrics, &output), 2);
  EXPECT_THAT(output, HasSubstr("--metrics-file: " + metrics + ": sluice_request_length holds several models "
                                "(asr_ctc, text_embed); name one with --model"));
  const std::string empty = Write("empty.txt", "# nothing here\n");
  EXPECT_EQ(Run("--metrics-file " + empty, &output), 2);
  EXPECT_THAT(output, HasSubstr("no sluice_request_length histogram"));
  EXPECT_EQ(Run("--metrics-file " + (dir_ / "missing.txt").string(), &output), 2);
  EXPECT_THAT(output, HasSubstr("--metrics-file: cannot read"));
  EXPECT_EQ(Run("--metrics-file " + metrics + " --lengths-file " + metrics, &output), 2);
  EXPECT_THAT(output, HasSubstr("excludes"));
  EXPECT_EQ(Run("--metrics-url http://127.0.0.1:1/metrics --model asr_ctc --metrics-timeout 2", &output), 2);
  EXPECT_THAT(output, HasSubstr("--metrics-url: GET http://127.0.0.1:1/metrics"));
  EXPECT_EQ(Run("--help", &output), 0);
  EXPECT_THAT(output, HasSubstr("--metrics-url"));
  EXPECT_THAT(output, HasSubstr("--audio-folder"));
}

// Answers the first HTTP request on 127.0.0.1:port() with `body`, then closes; path() is the request's path.
class OneShotHttpServer {
 public:
  explicit OneShotHttpServer(std::string body) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof addr;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), size) != 0 || ::listen(listener_, 1) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
      ADD_FAILURE() << "cannot listen on 127.0.0.1";
    }
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, body = std::move(body)] {
      const int client = ::accept(listener_, nullptr, nullptr);
      if (client < 0) return;  // closed unused
      std::string request;
      char buffer[4096];
      while (request.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = ::read(client, buffer, sizeof buffer);
        if (n <= 0) break;
        request.append(buffer, static_cast<size_t>(n));
      }
      const size_t start = request.find(' ') + 1;
      path_.set_value(request.substr(start, request.find(' ', start) - start));
      const std::string response = "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                                   std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
      for (size_t sent = 0; sent < response.size();) {
        const ssize_t n = ::write(client, response.data() + sent, response.size() - sent);
        if (n <= 0) break;
        sent += static_cast<size_t>(n);
      }
      ::close(client);
    });
  }
  ~OneShotHttpServer() {
    ::shutdown(listener_, SHUT_RDWR);  // wakes accept() when nobody came
    thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  std::string path() {
    std::future<std::string> f = path_.get_future();
    return f.wait_for(std::chrono::seconds(10)) == std::future_status::ready ? f.get() : "(no request)";
  }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::promise<std::string> path_;
  std::thread thread_;
};

TEST_F(AdvisorInputsCli, MetricsUrlReadsTheServersPageOnce) {
  OneShotHttpServer server(std::string(kHeader) + HistogramText("text_embed", {32, 64, 128}, {10, 30, 60, 60, 100}));
  std::string output;
  ASSERT_EQ(Run("--metrics-url http://127.0.0.1:" + std::to_string(server.port()) +
                    "/metrics --max-buckets 2 --cost-model 0.001,1e-6,0",
                &output),
            0)
      << output;
  EXPECT_EQ(server.path(), "/metrics");
  EXPECT_THAT(output, HasSubstr("buckets: {lengths: [64, 128]}"));
  EXPECT_THAT(output, HasSubstr("5 requests"));
}

TEST_F(AdvisorInputsCli, AudioFolderCountsSamplesAtTheModelsRate) {
  std::filesystem::create_directories(dir_ / "audio");
  WriteWav(dir_ / "audio" / "a.wav", 16000, 1, 12000);
  WriteWav(dir_ / "audio" / "b.wav", 8000, 1, 15000);
  const std::string config = AsrConfig();
  std::string output;
  ASSERT_EQ(Run("--audio-folder " + (dir_ / "audio").string() + " --model-config " + config +
                    " --max-buckets 2 --cost-model 0.001,1e-7,0",
                &output),
            0)
      << output;
  EXPECT_THAT(output, HasSubstr("buckets: {lengths: [12000, 30000], batch_sizes: [1, 2, 4, 8]}"));
  EXPECT_THAT(output, HasSubstr("2 recordings in"));
  EXPECT_THAT(output, HasSubstr("resampled to 16000 Hz"));
  EXPECT_EQ(Run("--audio-folder " + (dir_ / "audio").string() + " --max-buckets 2", &output), 2);
  EXPECT_THAT(output, HasSubstr("--audio-folder: needs --model-config of a speech model"));
}

}  // namespace
}  // namespace sluice::advisor
