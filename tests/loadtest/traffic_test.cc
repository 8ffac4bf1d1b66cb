// Unit tests of the traffic side of sluice-loadtest: arrival processes (rate and burstiness, deterministic by
// seed), length profiles, model mixes, the seeded workload, recordings read from a folder and the padding plan
// of --dry-run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <sndfile.h>

#include "loadtest/core/arrival_process.h"
#include "loadtest/core/audio_folder.h"
#include "loadtest/core/length_profile.h"
#include "loadtest/core/model_info.h"
#include "loadtest/core/padding_plan.h"
#include "loadtest/core/summary.h"
#include "loadtest/core/workload.h"
#include "loadtest/kserve/call_proto.h"

namespace sluice::loadtest {
namespace {

using ::testing::HasSubstr;

struct GapStats {
  double mean = 0, cv = 0;
};

GapStats Gaps(ArrivalProcess& p, int n) {
  std::vector<double> gaps(n);
  for (double& g : gaps) g = p.NextGap();
  GapStats s;
  s.mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / n;
  double var = 0;
  for (double g : gaps) var += (g - s.mean) * (g - s.mean);
  s.cv = std::sqrt(var / n) / s.mean;
  return s;
}

TEST(ArrivalProcessTest, PoissonHasTheRateAndUnitCoefficientOfVariation) {
  ArrivalProcess p(ArrivalKind::kPoisson, 50.0, 1.0, 7);
  GapStats s = Gaps(p, 200000);
  EXPECT_NEAR(1.0 / s.mean, 50.0, 50.0 * 0.01);
  EXPECT_NEAR(s.cv, 1.0, 0.02);
}

TEST(ArrivalProcessTest, GammaKeepsTheRateAndBurstinessSetsTheSpread) {
  for (double k : {0.25, 4.0}) {
    ArrivalProcess p(ArrivalKind::kGamma, 20.0, k, 11);
    GapStats s = Gaps(p, 200000);
    EXPECT_NEAR(1.0 / s.mean, 20.0, 20.0 * 0.015) << "burstiness " << k;
    EXPECT_NEAR(s.cv, 1.0 / std::sqrt(k), 0.05 / std::sqrt(k)) << "burstiness " << k;  // CV of Gamma(k) = 1/sqrt(k)
  }
}

TEST(ArrivalProcessTest, ConstantAndDeterministicBySeed) {
  ArrivalProcess c(ArrivalKind::kConstant, 4.0, 1.0, 1);
  EXPECT_DOUBLE_EQ(c.NextGap(), 0.25);
  ArrivalProcess a(ArrivalKind::kGamma, 10, 0.5, 42), b(ArrivalKind::kGamma, 10, 0.5, 42),
      other(ArrivalKind::kGamma, 10, 0.5, 43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const double x = a.NextGap();
    EXPECT_EQ(x, b.NextGap());
    differs |= x != other.NextGap();
  }
  EXPECT_TRUE(differs);
  EXPECT_FALSE(ParseArrivalKind("weibull").ok());
  EXPECT_EQ(*ParseArrivalKind("gamma"), ArrivalKind::kGamma);
}

TEST(LengthProfileTest, FixedUniformAndSeconds) {
  std::mt19937_64 rng(1);
  auto fixed = LengthProfile::Create("fixed:2.5s", 16000, 256000);
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ((*fixed)->Sample(rng), 40000);
  auto uniform = LengthProfile::Create("uniform:10-20", 0, 512);
  ASSERT_TRUE(uniform.ok());
  for (int i = 0; i < 1000; ++i) {
    const int64_t n = (*uniform)->Sample(rng);
    ASSERT_GE(n, 10);
    ASSERT_LE(n, 20);
  }
  auto clipped = LengthProfile::Create("fixed:100000", 0, 512);
  EXPECT_EQ((*clipped)->Sample(rng), 512);
}

TEST(LengthProfileTest, SpeechIsLibriSpeechLikeAndClippedToTheLargestBucket) {
  auto speech = LengthProfile::Create("speech", 16000, 256000);
  ASSERT_TRUE(speech.ok());
  std::mt19937_64 rng(3);
  std::vector<double> seconds;
  for (int i = 0; i < 20000; ++i) {
    const int64_t n = (*speech)->Sample(rng);
    ASSERT_GE(n, 1);
    ASSERT_LE(n, 256000);
    seconds.push_back(n / 16000.0);
  }
  std::sort(seconds.begin(), seconds.end());
  EXPECT_NEAR(Percentile(seconds, 50), 7.0, 0.3);
  EXPECT_GT(Percentile(seconds, 10), 2.5);
  EXPECT_LT(Percentile(seconds, 10), 4.0);
  EXPECT_DOUBLE_EQ(seconds.back(), 16.0);  // the long tail is clipped to the 16 s bucket
}

TEST(LengthProfileTest, FileAndErrors) {
  const auto path = std::filesystem::temp_directory_path() / ("lt_lengths_" + std::to_string(::getpid()));
  std::ofstream(path) << "# lengths\n100\n\n2s # two seconds\n";
  auto file = LengthProfile::Create("file:" + path.string(), 1000, 100000);
  ASSERT_TRUE(file.ok()) << file.status();
  std::mt19937_64 rng(5);
  std::set<int64_t> seen;
  for (int i = 0; i < 100; ++i) seen.insert((*file)->Sample(rng));
  EXPECT_EQ(seen, (std::set<int64_t>{100, 2000}));
  std::ofstream(path) << "100\nabc\n";
  auto bad = LengthProfile::Create("file:" + path.string(), 1000, 100000);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(":2:"));
  std::filesystem::remove(path);

  EXPECT_FALSE(LengthProfile::Create("fixed:3s", 0, 512).ok());  // seconds need a sample rate
  EXPECT_FALSE(LengthProfile::Create("uniform:20-10", 0, 512).ok());
  EXPECT_FALSE(LengthProfile::Create("zipf:3", 0, 512).ok());
  EXPECT_FALSE(LengthProfile::Create("file:/nonexistent/lengths", 0, 512).ok());
}

TEST(ModelMixTest, ParsesAndNormalises) {
  auto mix = ParseModelMix("asr_ctc:0.7,text_embed:0.7");
  ASSERT_TRUE(mix.ok());
  ASSERT_EQ(mix->size(), 2u);
  EXPECT_DOUBLE_EQ((*mix)[0].weight, 0.5);
  EXPECT_EQ((*mix)[1].model, "text_embed");
  EXPECT_DOUBLE_EQ((*ParseModelMix("asr_ctc"))[0].weight, 1.0);
  EXPECT_FALSE(ParseModelMix("a:0.5,a:0.5").ok());
  EXPECT_FALSE(ParseModelMix("a:-1").ok());
  EXPECT_FALSE(ParseModelMix("a:x").ok());
  EXPECT_FALSE(ParseModelMix(":1").ok());
}

ModelInfo Info(const std::string& name, const std::string& kind, const std::string& dtype, int64_t max_length) {
  ModelInfo info;
  info.name = name;
  info.kind = kind;
  info.input_name = kind == "speech" ? "audio" : "input_ids";
  info.datatype = dtype;
  info.max_length = max_length;
  info.sample_rate = kind == "speech" ? 16000 : 0;
  return info;
}

std::unique_ptr<Workload> MakeWorkload(uint64_t seed) {
  std::vector<WorkloadModel> models;
  models.push_back(
      {Info("asr_ctc", "speech", "FP32", 256000), 0.7, *LengthProfile::Create("speech", 16000, 256000), nullptr});
  models.push_back(
      {Info("text_embed", "text", "INT64", 512), 0.3, *LengthProfile::Create("uniform:1-512", 0, 512), nullptr});
  return *Workload::Create(std::move(models), seed);
}

TEST(WorkloadTest, RequestsArePureFunctionsOfSeedAndIndex) {
  auto a = MakeWorkload(9), b = MakeWorkload(9), c = MakeWorkload(10);
  int differs = 0;
  for (uint64_t i = 0; i < 50; ++i) {
    PlannedRequest x = a->Make(i), y = b->Make(i), z = c->Make(i);
    // Compared as the KServe request each becomes: every field the wire carries.
    const std::string xs = RequestFromCall(x.call).SerializeAsString();
    EXPECT_EQ(xs, RequestFromCall(y.call).SerializeAsString()) << i;
    differs += xs != RequestFromCall(z.call).SerializeAsString();
    EXPECT_EQ(a->Draw(i).model, x.model);
    EXPECT_EQ(a->Draw(i).length, x.length);
    ASSERT_EQ(x.call.inputs.size(), 1u);
    const CallTensor& input = x.call.inputs[0];
    ASSERT_EQ(input.shape.size(), 2u);
    EXPECT_EQ(input.shape[0], 1);
    EXPECT_EQ(input.shape[1], x.length);
    const size_t element = x.model == 0 ? 4 : 8;
    EXPECT_EQ(input.raw.size(), x.length * element);
    EXPECT_EQ(x.call.model, x.model == 0 ? "asr_ctc" : "text_embed");
  }
  EXPECT_GT(differs, 40);
}

TEST(WorkloadTest, MixSharesFollowTheWeightsAndTokensStayInVocabulary) {
  auto w = MakeWorkload(1);
  int asr = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) asr += w->Draw(i).model == 0;
  EXPECT_NEAR(asr / static_cast<double>(n), 0.7, 0.015);
  for (uint64_t i = 0; i < 200; ++i) {
    PlannedRequest r = w->Make(i);
    if (r.model != 1) continue;
    const std::string& raw = r.call.inputs[0].raw;
    for (size_t k = 0; k < raw.size() / 8; ++k) {
      int64_t id;
      std::memcpy(&id, raw.data() + 8 * k, 8);
      ASSERT_GE(id, 1);
      ASSERT_LT(id, 8192);
    }
  }
}

// Writes `frames` frames of `channels` channels at `rate` Hz; sample f of channel c is (f + c) / 1000.
void WriteWav(const std::filesystem::path& path, int rate, int channels, int frames) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr) << sf_strerror(nullptr);
  std::vector<float> data(frames * channels);
  for (int f = 0; f < frames; ++f) {
    for (int c = 0; c < channels; ++c) data[f * channels + c] = (f + c) / 1000.0f;
  }
  sf_writef_float(file, data.data(), frames);
  sf_close(file);
}

TEST(AudioFolderTest, ReadsMixesDownCutsAndFeedsTheWorkload) {
  const auto dir = std::filesystem::temp_directory_path() / ("lt_audio_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  WriteWav(dir / "a.wav", 16000, 1, 800);
  WriteWav(dir / "b.wav", 16000, 2, 300);   // stereo: averaged to mono
  WriteWav(dir / "c.wav", 16000, 1, 5000);  // longer than the largest bucket below
  auto folder = LoadAudioFolder(dir.string(), 16000, 1000);
  ASSERT_TRUE(folder.ok()) << folder.status();
  ASSERT_EQ(folder->clips.size(), 3u);
  EXPECT_EQ(folder->clips[0].name, "a.wav");
  EXPECT_EQ(folder->clips[0].samples.size(), 800u);
  EXPECT_NEAR(folder->clips[1].samples[10], (10 + 11) / 2000.0, 1e-6);
  EXPECT_EQ(folder->clips[2].samples.size(), 1000u);
  EXPECT_EQ(folder->truncated, 1);

  ModelInfo info = Info("asr_ctc", "speech", "FP32", 1000);
  std::vector<WorkloadModel> models;
  models.push_back({info, 1.0, nullptr, std::make_shared<const AudioFolder>(*folder)});
  auto workload = Workload::Create(std::move(models), 3);
  ASSERT_TRUE(workload.ok()) << workload.status();
  std::set<int> clips;
  for (uint64_t i = 0; i < 40; ++i) {
    PlannedRequest r = (*workload)->Make(i);
    ASSERT_GE(r.clip, 0);
    clips.insert(r.clip);
    const std::vector<float>& want = folder->clips[r.clip].samples;
    EXPECT_EQ(r.length, static_cast<int64_t>(want.size()));
    EXPECT_EQ(r.call.inputs[0].raw,
              std::string(reinterpret_cast<const char*>(want.data()), want.size() * sizeof(float)));
  }
  EXPECT_EQ(clips.size(), 3u);

  // Another rate is resampled to the model's (the server would do the same), not refused.
  WriteWav(dir / "d.wav", 8000, 1, 100);
  auto other_rate = LoadAudioFolder(dir.string(), 16000, 1000);
  ASSERT_TRUE(other_rate.ok()) << other_rate.status();
  EXPECT_EQ(other_rate->resampled, 1);
  EXPECT_NEAR(static_cast<double>(other_rate->clips[3].samples.size()), 200.0, 2.0);
  // A ratio libsamplerate cannot convert (over 256) is an error naming the file and rate.
  WriteWav(dir / "d.wav", 40, 1, 100);
  auto wrong_rate = LoadAudioFolder(dir.string(), 16000, 1000);
  ASSERT_FALSE(wrong_rate.ok());
  EXPECT_THAT(std::string(wrong_rate.status().message()), HasSubstr("d.wav: 40 Hz cannot be resampled"));
  std::ofstream(dir / "d.wav") << "not audio";
  EXPECT_FALSE(LoadAudioFolder(dir.string(), 16000, 1000).ok());
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(LoadAudioFolder(dir.string(), 16000, 1000).ok());
}


TEST(PaddingPlanTest, CountsEachBucketAndComparesWithPadToMax) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "sluice_plan_lengths.txt";
  std::ofstream(path) << "1000\n3000\n4000\n";  // drawn uniformly: buckets 1024, 4096, 4096
  ModelInfo info = Info("asr_ctc", "speech", "FP32", 8192);
  info.bucket_lengths = {1024, 4096, 8192};
  std::vector<WorkloadModel> models;
  models.push_back({info, 1.0, *LengthProfile::Create("file:" + path.string(), 16000, 8192), nullptr});
  auto workload = *Workload::Create(std::move(models), 5);

  const std::vector<ModelPaddingPlan> plans = PlanPadding(*workload, 0, 3000);
  ASSERT_EQ(plans.size(), 1u);
  const ModelPaddingPlan& p = plans[0];
  EXPECT_EQ(p.requests, 3000);
  EXPECT_EQ(p.max_bucket, 8192);
  ASSERT_EQ(p.buckets.size(), 3u);
  EXPECT_EQ(p.buckets[2].requests, 0);  // listed although empty
  EXPECT_EQ(p.buckets[0].requests + p.buckets[1].requests, 3000);
  EXPECT_NEAR(p.buckets[0].requests / 3000.0, 1.0 / 3, 0.05);
  // Exact arithmetic from the per-bucket counts.
  double real = 0, padded = 0;
  for (uint64_t i = 0; i < 3000; ++i) {
    const int64_t length = workload->Draw(i).length;
    real += length;
    padded += length <= 1024 ? 1024 : 4096;
  }
  EXPECT_DOUBLE_EQ(p.real_steps, real);
  EXPECT_DOUBLE_EQ(p.bucket_steps, padded);
  EXPECT_DOUBLE_EQ(p.efficiency(), real / padded);
  EXPECT_DOUBLE_EQ(p.pad_to_max_efficiency(), real / (3000.0 * 8192));
  EXPECT_DOUBLE_EQ(p.audio_seconds, real / 16000);
  EXPECT_THAT(FormatPaddingPlan(plans), ::testing::HasSubstr("pad-to-max (8192)"));
  EXPECT_THAT(PaddingPlanToJson(plans, 5), ::testing::HasSubstr("\"schema\": \"sluice-loadtest-plan/1\""));
}

}  // namespace
}  // namespace sluice::loadtest
