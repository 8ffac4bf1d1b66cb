// WhisperStreamSession with a scripted "recognizer": a run's text names the stream samples it covered, so the test
// sees which audio each run recognized, which results are interim and final, and that the finals partition the
// stream into the same 30 s windows Recognize cuts a long recording into.
#include "server/voice/whisper_stream_session.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::voice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int kRate = 100;     // small numbers: 1 s = 100 samples
constexpr int64_t kWindow = 3000;  // the 30 s window
const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

WhisperStreamSession Session(bool interim, int64_t step = 100) {
  auto session = WhisperStreamSession::Create(
      {.sample_rate = kRate, .window_samples = kWindow, .interim_step_samples = step, .interim_results = interim});
  EXPECT_TRUE(session.ok()) << session.status();
  return *std::move(session);
}

// The scripted recognizer: "[start,end)" of the run; every sample of a run must be its stream index (AddSeconds
// writes them so), which checks the audio handed over is the right stretch.
Recognition Recognize(const StreamWindow& window) {
  for (size_t i = 0; i < window.samples.size(); ++i) {
    EXPECT_EQ(window.samples[i], static_cast<float>(window.start + static_cast<int64_t>(i)));
  }
  Recognition r;
  r.transcript.text = absl::StrCat("[", window.start, ",", window.end, ")");
  return r;
}

class Stream {
 public:
  explicit Stream(WhisperStreamSession session) : session_(std::move(session)) {}

  void AddSeconds(double seconds) {
    std::vector<float> samples(static_cast<size_t>(seconds * kRate));
    for (float& s : samples) s = static_cast<float>(next_++);
    now_ += absl::Seconds(seconds);
    session_.AddAudio(samples, now_);
  }
  // Runs every window the session asks for now, each finishing `took` later; collects the results.
  void RunAll(absl::Duration took = absl::Milliseconds(500)) {
    while (std::optional<StreamWindow> window = session_.NextWindow()) {
      now_ += took;
      absl::StatusOr<WindowOutcome> outcome = session_.OnRecognitionDone(Recognize(*window), now_);
      ASSERT_TRUE(outcome.ok()) << outcome.status();
      for (const StreamResult& r : outcome->results) {
        (r.is_final ? finals : interims).push_back(r.transcript.text);
        processed.push_back(r.audio_processed);
      }
      if (outcome->final_latency) final_latencies.push_back(*outcome->final_latency);
    }
  }
  void End() {
    session_.EndOfAudio(now_);
    RunAll();
    if (std::optional<WindowOutcome> closing = session_.TakeClosingResult(now_)) {
      for (const StreamResult& r : closing->results) (r.is_final ? finals : interims).push_back(r.transcript.text);
    }
  }
  WhisperStreamSession& session() { return session_; }

  std::vector<std::string> interims, finals;
  std::vector<double> processed;
  std::vector<absl::Duration> final_latencies;

 private:
  WhisperStreamSession session_;
  int64_t next_ = 0;
  absl::Time now_ = kT0;
};

TEST(WhisperStreamSessionTest, FinalsCutTheStreamIntoWindowsAsRecognizeCutsALongRecording) {
  Stream stream(Session(/*interim=*/false));
  for (int i = 0; i < 75; ++i) {  // 75 s in 1 s chunks
    stream.AddSeconds(1);
    stream.RunAll();
  }
  EXPECT_THAT(stream.finals, ElementsAre("[0,3000)", "[3000,6000)"));  // each full window at once
  EXPECT_TRUE(stream.interims.empty());
  EXPECT_FALSE(stream.session().finished());
  stream.End();
  EXPECT_THAT(stream.finals, ElementsAre("[0,3000)", "[3000,6000)", "[6000,7500)"));
  EXPECT_THAT(stream.processed, ElementsAre(30.0, 60.0, 75.0));
  EXPECT_TRUE(stream.session().finished());
  EXPECT_EQ(stream.session().backlog_samples(), 0);
}

TEST(WhisperStreamSessionTest, InterimsRecognizeTheSegmentSoFarOncePerStepOfNewAudio) {
  Stream stream(Session(/*interim=*/true, /*step=*/200));
  for (int i = 0; i < 9; ++i) {  // 0.5 s chunks: a run once 2 s of new audio came since the last run began
    stream.AddSeconds(0.5);
    stream.RunAll();
  }
  EXPECT_THAT(stream.interims, ElementsAre("[0,200)", "[0,400)"));
  stream.End();
  EXPECT_THAT(stream.finals, ElementsAre("[0,450)"));
}

TEST(WhisperStreamSessionTest, OneRunAtATimeAndAudioArrivingMeanwhileJoinsTheNextRun) {
  WhisperStreamSession session = Session(/*interim=*/true, /*step=*/100);
  std::vector<float> second(100, 0.0f);
  session.AddAudio(second, kT0);
  std::optional<StreamWindow> first = session.NextWindow();
  ASSERT_TRUE(first.has_value());
  session.AddAudio(second, kT0 + absl::Seconds(1));
  session.AddAudio(second, kT0 + absl::Seconds(2));
  EXPECT_FALSE(session.NextWindow().has_value()) << "a run is in flight";
  EXPECT_EQ(session.backlog_samples(), 200);
  ASSERT_TRUE(session.OnRecognitionDone(Recognition{}, kT0 + absl::Seconds(2)).ok());
  std::optional<StreamWindow> next = session.NextWindow();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->start, 0);
  EXPECT_EQ(next->end, 300);
  EXPECT_EQ(session.OnRecognitionDone(Recognition{}, kT0).status().code(), absl::StatusCode::kOk);
  EXPECT_EQ(session.OnRecognitionDone(Recognition{}, kT0).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(WhisperStreamSessionTest, AnInterimInFlightWhenTheAudioEndsIsSupersededAndMayBeAbandoned) {
  WhisperStreamSession session = Session(/*interim=*/true, /*step=*/100);
  std::vector<float> second(100, 0.0f);
  session.AddAudio(second, kT0);
  ASSERT_TRUE(session.NextWindow().has_value());  // an interim over [0, 100)
  EXPECT_FALSE(session.RunSuperseded()) << "the audio goes on: the interim is wanted";
  session.AddAudio(second, kT0 + absl::Seconds(1));
  session.EndOfAudio(kT0 + absl::Seconds(1));
  EXPECT_TRUE(session.RunSuperseded());
  session.AbandonRun();  // cancelled: no result
  std::optional<StreamWindow> last = session.NextWindow();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->end, 200);
  EXPECT_TRUE(last->last);
  EXPECT_FALSE(session.RunSuperseded()) << "a final run is never superseded";
  absl::StatusOr<WindowOutcome> outcome = session.OnRecognitionDone(Recognition{}, kT0 + absl::Seconds(3));
  ASSERT_TRUE(outcome.ok());
  ASSERT_EQ(outcome->results.size(), 1u);
  EXPECT_TRUE(outcome->results[0].is_final);
  EXPECT_EQ(outcome->final_latency, absl::Seconds(2));
}

TEST(WhisperStreamSessionTest, AStreamWithoutAudioGetsOneEmptyFinal) {
  Stream stream(Session(/*interim=*/true));
  stream.End();
  EXPECT_THAT(stream.finals, ElementsAre(""));
  EXPECT_TRUE(stream.session().finished());
}

TEST(WhisperStreamSessionTest, TheLastFinalsLatencyCountsFromTheEndOfTheAudio) {
  Stream stream(Session(/*interim=*/false));
  stream.AddSeconds(4);
  stream.End();  // the final run takes 500 ms after the end
  ASSERT_EQ(stream.final_latencies.size(), 1u);
  EXPECT_EQ(stream.final_latencies[0], absl::Milliseconds(500));
}

TEST(WhisperStreamSessionTest, LogProbsAndBadOptionsAreRefused) {
  WhisperStreamSession session = Session(false);
  EXPECT_EQ(session.OnWindowDone(WindowLogProbs{}, kT0).status().code(), absl::StatusCode::kFailedPrecondition);
  auto bad = WhisperStreamSession::Create({.sample_rate = kRate, .window_samples = 100, .interim_step_samples = 200});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("step"));
}

// Endpointing: speech (amplitude 0.5) and silence (zeros) in 10 ms VAD frames of 1 sample each (kRate 100).
class EndpointStream {
 public:
  explicit EndpointStream(int64_t silence = 80, int64_t min_speech = 0) {
    auto session = WhisperStreamSession::Create({.sample_rate = kRate, .window_samples = kWindow,
                                                 .interim_step_samples = 100, .interim_results = false,
                                                 .endpoint_silence_samples = silence,
                                                 .endpoint_min_speech_samples = min_speech,
                                                 .vad_frame_samples = 1, .speech_rms = 0.01f});
    EXPECT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
  }
  void Add(double seconds, float value) {
    session_->AddAudio(std::vector<float>(static_cast<size_t>(seconds * kRate), value), kT0);
  }
  // Runs what the session asks for; the finals' [start, end).
  std::vector<std::string> Run() {
    std::vector<std::string> finals;
    while (std::optional<StreamWindow> window = session_->NextWindow()) {
      absl::StatusOr<WindowOutcome> outcome = session_->OnRecognitionDone(Recognition{}, kT0);
      EXPECT_TRUE(outcome.ok());
      if (outcome->results[0].is_final) finals.push_back(absl::StrCat("[", window->start, ",", window->end, ")"));
    }
    return finals;
  }
  WhisperStreamSession& session() { return *session_; }

 private:
  std::optional<WhisperStreamSession> session_;
};

TEST(WhisperStreamSessionTest, EndpointingEndsASegmentInTheMiddleOfASilenceAfterSpeech) {
  EndpointStream stream(/*silence=*/80);
  stream.Add(2, 0.0f);    // leading silence: no speech yet, no endpoint
  EXPECT_TRUE(stream.Run().empty());
  stream.Add(3, 0.5f);    // speech [200, 500)
  stream.Add(0.5, 0.0f);  // 50 of silence: not yet
  EXPECT_TRUE(stream.Run().empty());
  stream.Add(0.5, 0.0f);  // silence reaches 80 at 580: cut at 500 + 40
  EXPECT_THAT(stream.Run(), ElementsAre("[0,540)"));
  stream.Add(3, 0.0f);    // more silence: the new segment has no speech, no endpoint
  EXPECT_TRUE(stream.Run().empty());
  stream.Add(1, 0.5f);    // speech [900, 1000), then silence past 80
  stream.Add(1, 0.0f);
  EXPECT_THAT(stream.Run(), ElementsAre("[540,1040)"));
  stream.session().EndOfAudio(kT0);
  EXPECT_THAT(stream.Run(), ElementsAre("[1040,1100)"));  // the rest, at the end
}

TEST(WhisperStreamSessionTest, EndpointingNeedsTheMinimumSpeechAndSupersedesAnInterim) {
  EndpointStream stream(/*silence=*/50, /*min_speech=*/100);
  stream.Add(0.5, 0.5f);  // 50 of speech: under the minimum
  stream.Add(1, 0.0f);
  EXPECT_TRUE(stream.Run().empty());
  stream.Add(1, 0.5f);    // 100 more: 150 in all
  stream.Add(1, 0.0f);    // cut at 250 + 25
  EXPECT_THAT(stream.Run(), ElementsAre("[0,275)"));

  auto interim = WhisperStreamSession::Create({.sample_rate = kRate, .window_samples = kWindow,
                                               .interim_step_samples = 10, .interim_results = true,
                                               .endpoint_silence_samples = 50, .vad_frame_samples = 1});
  ASSERT_TRUE(interim.ok());
  interim->AddAudio(std::vector<float>(100, 0.5f), kT0);
  ASSERT_TRUE(interim->NextWindow().has_value());  // an interim run
  EXPECT_FALSE(interim->RunSuperseded());
  interim->AddAudio(std::vector<float>(60, 0.0f), kT0);  // an endpoint while it runs
  EXPECT_TRUE(interim->RunSuperseded());
  interim->AbandonRun();
  std::optional<StreamWindow> final_run = interim->NextWindow();
  ASSERT_TRUE(final_run.has_value());
  EXPECT_EQ(final_run->end, 125);
}

}  // namespace
}  // namespace sluice::voice
