// PlanWindows and Stitch with asr_ctc's frame rule (640 samples per 40 ms frame, 16 kHz): short audio, exactly
// one window, one sample over, a short final window, 10 minutes of audio (kept ranges tile the model's frames,
// lie inside each window's own frames, starts are frame-aligned, stitched frames come from the right window and
// the right frame), other frame rules, and the errors for bad options and bad window outputs.
#include "server/voice/audio_windows.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace sluice::voice {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kRate = 16000;
constexpr int64_t kPerFrame = 640;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// asr_ctc: a hop of 160 samples, then two stride-2 subsamplings.
int64_t AsrCtcFrames(int64_t n) { return CeilDiv(CeilDiv(CeilDiv(n, 160), 2), 2); }

WindowPlanOptions Options(int64_t window_samples, int64_t overlap_samples) {
  return {window_samples, overlap_samples, kPerFrame, AsrCtcFrames};
}

// The properties every plan must have, whatever the audio length.
void ExpectValidPlan(const std::vector<AudioWindow>& plan, int64_t total, const WindowPlanOptions& options) {
  ASSERT_FALSE(plan.empty());
  int64_t next_frame = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const AudioWindow& w = plan[i];
    SCOPED_TRACE(testing::Message() << "window " << i);
    EXPECT_EQ(w.start_sample % options.samples_per_frame, 0);
    EXPECT_GE(w.num_samples, 1);
    EXPECT_LE(w.num_samples, options.window_samples);
    EXPECT_EQ(w.num_frames, options.frames_for_samples(w.num_samples));
    EXPECT_GE(w.keep_begin_frame, 0);
    EXPECT_LT(w.keep_begin_frame, w.keep_end_frame);
    EXPECT_LE(w.keep_end_frame, w.num_frames);
    EXPECT_EQ(w.global_begin_frame, next_frame);  // no gap, no overlap
    // A window's frame j is global frame start / samples_per_frame + j.
    EXPECT_EQ(w.global_begin_frame, w.start_sample / options.samples_per_frame + w.keep_begin_frame);
    if (i + 1 < plan.size()) {
      EXPECT_EQ(w.num_samples, options.window_samples);
    }
    next_frame += w.keep_end_frame - w.keep_begin_frame;
  }
  EXPECT_EQ(plan.back().start_sample + plan.back().num_samples, total);  // the last window covers the end
  EXPECT_EQ(next_frame, options.frames_for_samples(total));
  EXPECT_EQ(StitchedFrames(plan), options.frames_for_samples(total));
}

TEST(PlanWindowsTest, AudioShorterThanAWindowIsOneWindow) {
  const auto plan = PlanWindows(10000, Options(16 * kRate, 2 * kRate));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  const AudioWindow& w = plan->front();
  EXPECT_EQ(w.start_sample, 0);
  EXPECT_EQ(w.num_samples, 10000);
  EXPECT_EQ(w.num_frames, 16);
  EXPECT_EQ(w.keep_begin_frame, 0);
  EXPECT_EQ(w.keep_end_frame, 16);
  EXPECT_EQ(w.global_begin_frame, 0);
}

TEST(PlanWindowsTest, ExactlyOneWindow) {
  const auto plan = PlanWindows(16 * kRate, Options(16 * kRate, 2 * kRate));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_EQ(plan->front().num_samples, 16 * kRate);
  EXPECT_EQ(plan->front().keep_end_frame, 400);
}

TEST(PlanWindowsTest, OneSampleOverOneWindow) {
  const WindowPlanOptions options = Options(16 * kRate, 2 * kRate);
  const auto plan = PlanWindows(16 * kRate + 1, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectValidPlan(*plan, 16 * kRate + 1, options);
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].keep_end_frame, 350);  // 16 s - 2 s of overlap
  const AudioWindow& last = (*plan)[1];
  EXPECT_EQ(last.start_sample, 12 * kRate);  // stride = 16 s - 2 * 2 s
  EXPECT_EQ(last.num_samples, 4 * kRate + 1);
  EXPECT_EQ(last.num_frames, 101);
  EXPECT_EQ(last.keep_begin_frame, 50);
  EXPECT_EQ(last.keep_end_frame, 101);
  EXPECT_EQ(last.global_begin_frame, 350);
}

TEST(PlanWindowsTest, FinalShortWindow) {
  const WindowPlanOptions options = Options(4 * kRate, 6400);  // 4 s windows, 0.4 s overlap
  const auto plan = PlanWindows(100000, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectValidPlan(*plan, 100000, options);
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[1].start_sample, 51200);
  EXPECT_EQ((*plan)[1].num_samples, 100000 - 51200);
  EXPECT_EQ((*plan)[1].keep_begin_frame, 10);
}

TEST(PlanWindowsTest, NoOverlapTilesWindows) {
  const WindowPlanOptions options = Options(kRate * 2, 0);
  const auto plan = PlanWindows(5 * kRate + 1, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectValidPlan(*plan, 5 * kRate + 1, options);
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ(plan->back().num_samples, kRate + 1);
}

TEST(PlanWindowsTest, TenMinutesStitchFromTheRightWindowAndFrame) {
  const WindowPlanOptions options = Options(16 * kRate, 2 * kRate);
  const int64_t total = 10 * 60 * kRate;
  const auto plan = PlanWindows(total, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ExpectValidPlan(*plan, total, options);
  EXPECT_EQ(plan->size(), 50u);  // starts every 12 s; the one at 588 s reaches 600 s
  EXPECT_EQ(StitchedFrames(*plan), 15000);

  // Each window's "log-probs": class 0 holds the window index, class 1 its own frame index.
  std::vector<std::vector<float>> outputs;
  for (size_t k = 0; k < plan->size(); ++k) {
    std::vector<float> frames;
    for (int64_t j = 0; j < (*plan)[k].num_frames; ++j) {
      frames.push_back(static_cast<float>(k));
      frames.push_back(static_cast<float>(j));
    }
    outputs.push_back(std::move(frames));
  }
  const auto stitched = Stitch(*plan, outputs, 2);
  ASSERT_TRUE(stitched.ok()) << stitched.status();
  ASSERT_EQ(stitched->size(), 15000u * 2);
  const int64_t overlap_frames = 2 * kRate / kPerFrame;
  const int64_t window_frames = 16 * kRate / kPerFrame;
  int64_t previous_window = 0;
  for (int64_t g = 0; g < 15000; ++g) {
    const auto k = static_cast<int64_t>((*stitched)[2 * g]);
    const auto j = static_cast<int64_t>((*stitched)[2 * g + 1]);
    ASSERT_TRUE(k == previous_window || k == previous_window + 1) << "frame " << g;
    previous_window = k;
    const AudioWindow& w = (*plan)[k];
    ASSERT_EQ(w.start_sample / kPerFrame + j, g) << "frame " << g;  // the same audio position
    // Centre frames only, except at the audio's two ends.
    if (k > 0) {
      ASSERT_GE(j, overlap_frames) << "frame " << g;
    }
    if (k + 1 < static_cast<int64_t>(plan->size())) {
      ASSERT_LT(j, window_frames - overlap_frames) << "frame " << g;
    }
  }
}

TEST(PlanWindowsTest, OtherShiftConsistentFrameRules) {
  // A centred STFT without subsampling: n / hop + 1 frames.
  WindowPlanOptions options{8000, 800, 160, [](int64_t n) { return n / 160 + 1; }};
  for (int64_t total : {1, 7999, 8000, 8001, 8159, 8160, 123457}) {
    SCOPED_TRACE(total);
    const auto plan = PlanWindows(total, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ExpectValidPlan(*plan, total, options);
  }
}

TEST(PlanWindowsTest, InconsistentFrameRuleIsAnError) {
  WindowPlanOptions options = Options(16 * kRate, 2 * kRate);
  options.frames_for_samples = [](int64_t n) { return CeilDiv(n, 2 * kPerFrame); };  // half the frames
  const auto plan = PlanWindows(60 * kRate, options);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(plan.status().message(), HasSubstr("frames_for_samples"));
}

TEST(PlanWindowsTest, EmptyAndNegativeAudio) {
  const auto empty = PlanWindows(0, Options(16 * kRate, 2 * kRate));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  const auto stitched = Stitch(*empty, {}, 29);
  ASSERT_TRUE(stitched.ok());
  EXPECT_TRUE(stitched->empty());
  EXPECT_THAT(PlanWindows(-1, Options(16 * kRate, 2 * kRate)).status().message(), HasSubstr("total_samples"));
}

TEST(PlanWindowsTest, InvalidOptionsNameTheField) {
  auto message = [](const WindowPlanOptions& options) {
    const absl::Status status = PlanWindows(100 * kRate, options).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    return std::string(status.message());
  };
  EXPECT_THAT(message(Options(0, 0)), HasSubstr("window_samples must be > 0"));
  EXPECT_THAT(message(Options(-640, 0)), HasSubstr("window_samples must be > 0"));
  EXPECT_THAT(message(Options(6400, -640)), HasSubstr("overlap_samples must be >= 0"));
  EXPECT_THAT(message(Options(6400, 3200)), HasSubstr("2 * overlap_samples"));
  EXPECT_THAT(message(Options(6400, 3840)), HasSubstr("2 * overlap_samples"));
  EXPECT_THAT(message({6400, 640, 0, AsrCtcFrames}), HasSubstr("samples_per_frame must be > 0"));
  EXPECT_THAT(message(Options(6500, 640)), HasSubstr("window_samples (6500) must be a multiple"));
  EXPECT_THAT(message(Options(6400, 700)), HasSubstr("overlap_samples (700) must be a multiple"));
  EXPECT_THAT(message({6400, 640, 640, nullptr}), HasSubstr("frames_for_samples is not set"));
}

TEST(StitchTest, RejectsBadWindowOutputs) {
  const auto plan = PlanWindows(20 * kRate, Options(16 * kRate, 2 * kRate));
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->size(), 2u);
  std::vector<std::vector<float>> outputs;
  for (const AudioWindow& w : *plan) outputs.emplace_back(w.num_frames * 3, 0.0f);
  ASSERT_TRUE(Stitch(*plan, outputs, 3).ok());

  EXPECT_THAT(Stitch(*plan, outputs, 0).status().message(), HasSubstr("num_classes must be > 0"));
  EXPECT_THAT(Stitch(*plan, {outputs[0]}, 3).status().message(), HasSubstr("2 windows but 1 window outputs"));
  std::vector<std::vector<float>> short_output = outputs;
  short_output[1].resize(short_output[1].size() - 3);
  const absl::Status status = Stitch(*plan, short_output, 3).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("window 1 output has"));

  std::vector<AudioWindow> broken = *plan;
  broken[1].global_begin_frame += 1;  // a gap
  EXPECT_THAT(Stitch(broken, outputs, 3).status().message(), HasSubstr("window 1 keeps frames"));
}

}  // namespace
}  // namespace sluice::voice
