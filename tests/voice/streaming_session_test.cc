// StreamingSession on a scripted "model": each output frame's best class is a function of the frame's position in
// the stream, so the transcript the session assembles from overlapping windows can be checked against decoding
// the script over the whole stream at once.
#include "server/voice/streaming_session.h"

#include <functional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sluice::voice {
namespace {

using ::testing::HasSubstr;

constexpr int kRate = 16000;
constexpr int64_t kFrame = 640;
constexpr int64_t kClasses = 4;  // blank, a, b, space
const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

SymbolTable Symbols() { return SymbolTable{.symbols = {"<blank>", "a", "b", " "}, .blank = 0}; }

StreamingSessionOptions Options(bool interim = true) {
  return StreamingSessionOptions{.sample_rate = kRate,
                                 .frame_samples = kFrame,
                                 .max_window_samples = 4 * kRate,
                                 .blank = 0,
                                 .streaming = {.step_ms = 480, .left_context_ms = 2000, .lookahead_ms = 960,
                                               .endpoint_silence_ms = 800},
                                 .interim_results = interim};
}

// The scripted model: frame f of the stream (f = sample / kFrame) has best class script(f).
using Script = std::function<int(int64_t)>;

WindowLogProbs RunScripted(const StreamWindow& window, const Script& script) {
  WindowLogProbs out;
  out.classes = kClasses;
  out.frames = (window.end - window.start + kFrame - 1) / kFrame;
  out.values.assign(out.frames * kClasses, -10.0f);
  for (int64_t k = 0; k < out.frames; ++k) out.values[k * kClasses + script(window.start / kFrame + k)] = 0.0f;
  return out;
}

std::string DecodeWhole(const Script& script, int64_t frames) {
  StreamWindow whole;
  whole.end = frames * kFrame;
  WindowLogProbs all = RunScripted(whole, script);
  return GreedyCtcDecoder(Symbols()).Decode(all.values, all.frames, kClasses, FrameTiming{.frame_seconds = 0.04}).text;
}

struct Collected {
  std::vector<StreamResult> results;
  std::vector<int64_t> window_lengths;
  int chunk_latencies = 0;
};

// Feeds `seconds` of audio in `chunk_ms` chunks (one chunk per chunk_ms of the fake clock), running every window
// as soon as the session offers it, then ends the audio.
Collected Stream(StreamingSession& session, double seconds, int chunk_ms, const Script& script) {
  Collected c;
  absl::Time now = kT0;
  const auto drain = [&] {
    while (std::optional<StreamWindow> window = session.NextWindow()) {
      EXPECT_LE(static_cast<int64_t>(window->samples.size()), 4 * kRate);
      EXPECT_EQ(static_cast<int64_t>(window->samples.size()), window->end - window->start);
      c.window_lengths.push_back(window->end - window->start);
      absl::StatusOr<WindowOutcome> outcome = session.OnWindowDone(RunScripted(*window, script), now);
      EXPECT_TRUE(outcome.ok()) << outcome.status();
      if (!outcome.ok()) return;
      for (StreamResult& r : outcome->results) c.results.push_back(std::move(r));
      c.chunk_latencies += static_cast<int>(outcome->chunk_latencies.size());
    }
  };
  const int64_t total = static_cast<int64_t>(seconds * kRate), chunk = chunk_ms * kRate / 1000;
  for (int64_t sent = 0; sent < total; sent += chunk) {
    std::vector<float> samples(std::min(chunk, total - sent), 0.1f);
    session.AddAudio(samples, now);
    drain();
    now += absl::Milliseconds(chunk_ms);
  }
  session.EndOfAudio(now);
  drain();
  if (std::optional<WindowOutcome> closing = session.TakeClosingResult(now)) {
    for (StreamResult& r : closing->results) c.results.push_back(std::move(r));
  }
  return c;
}

// "ab ab ab ..." with blanks between symbols: a word every 8 frames (320 ms).
int Words(int64_t f) {
  switch (f % 8) {
    case 1: return 1;
    case 3: return 2;
    case 5: return 3;
    default: return 0;
  }
}

TEST(StreamingSession, RealTimeChunksGiveInterimsThenOneFinalEqualToWholeDecoding) {
  GreedyCtcDecoder decoder(Symbols());
  absl::StatusOr<StreamingSession> session = StreamingSession::Create(Options(), &decoder);
  ASSERT_TRUE(session.ok()) << session.status();
  Collected c = Stream(*session, 6.0, 100, Words);
  ASSERT_GE(c.results.size(), 3u);
  for (size_t i = 0; i + 1 < c.results.size(); ++i) EXPECT_FALSE(c.results[i].is_final) << i;
  const StreamResult& final_result = c.results.back();
  EXPECT_TRUE(final_result.is_final);
  EXPECT_DOUBLE_EQ(final_result.audio_processed, 6.0);
  EXPECT_EQ(final_result.transcript.text, DecodeWhole(Words, 6 * kRate / kFrame));
  EXPECT_TRUE(session->finished());
  EXPECT_EQ(c.chunk_latencies, 60);  // every chunk was covered by some window
  // Once 2 s are committed (from the window ending at 3.5 s), every window is left context + lookahead + about a
  // step: one bucket for all streams.
  for (size_t i = 7; i < c.window_lengths.size() - 1; ++i) {
    EXPECT_GE(c.window_lengths[i], 2 * kRate + 15360) << i;
    EXPECT_LE(c.window_lengths[i], 2 * kRate + 15360 + 7680 + 2 * 1600) << i;
  }
  // Interims grow: each one's transcript starts with the previous one's committed part; stability in [0, 1].
  for (const StreamResult& r : c.results) {
    EXPECT_GE(r.stability, 0.0f);
    EXPECT_LE(r.stability, 1.0f);
  }
}

TEST(StreamingSession, WithoutInterimResultsOnlyTheFinalIsSent) {
  GreedyCtcDecoder decoder(Symbols());
  absl::StatusOr<StreamingSession> session = StreamingSession::Create(Options(/*interim=*/false), &decoder);
  ASSERT_TRUE(session.ok());
  Collected c = Stream(*session, 3.0, 200, Words);
  ASSERT_EQ(c.results.size(), 1u);
  EXPECT_TRUE(c.results[0].is_final);
  EXPECT_EQ(c.results[0].transcript.text, DecodeWhole(Words, 3 * kRate / kFrame));
}

TEST(StreamingSession, TrailingSilenceAfterSpeechEndsTheSegmentWithAFinal) {
  GreedyCtcDecoder decoder(Symbols());
  absl::StatusOr<StreamingSession> session = StreamingSession::Create(Options(), &decoder);
  ASSERT_TRUE(session.ok());
  // Speech in the first second, silence for two, speech again from 3 s.
  const Script script = [](int64_t f) { return (f < 25 || f >= 75) ? Words(f) : 0; };
  Collected c = Stream(*session, 5.0, 100, script);
  std::vector<const StreamResult*> finals;
  for (const StreamResult& r : c.results) {
    if (r.is_final) finals.push_back(&r);
  }
  ASSERT_EQ(finals.size(), 2u);
  EXPECT_EQ(finals[0]->transcript.text, DecodeWhole(Words, 25));  // the first utterance alone
  EXPECT_LT(finals[0]->audio_processed, 3.0);
  EXPECT_DOUBLE_EQ(finals[1]->audio_processed, 5.0);
  ASSERT_FALSE(finals[1]->transcript.words.empty());
  EXPECT_GE(finals[1]->transcript.words.front().start_ms, 3000);  // times count from the stream's start
}

TEST(StreamingSession, AudioFasterThanRealTimeRunsInWindowsNoLongerThanTheLargestBucket) {
  GreedyCtcDecoder decoder(Symbols());
  absl::StatusOr<StreamingSession> session = StreamingSession::Create(Options(/*interim=*/false), &decoder);
  ASSERT_TRUE(session.ok());
  std::vector<float> twenty_seconds(20 * kRate, 0.1f);
  session->AddAudio(twenty_seconds, kT0);
  EXPECT_EQ(session->backlog_samples(), 20 * kRate);
  session->EndOfAudio(kT0);
  std::vector<StreamResult> results;
  int windows = 0;
  while (std::optional<StreamWindow> window = session->NextWindow()) {
    EXPECT_LE(window->end - window->start, 4 * kRate);
    EXPECT_FALSE(session->NextWindow().has_value());  // one window in flight at a time
    absl::StatusOr<WindowOutcome> outcome = session->OnWindowDone(RunScripted(*window, Words), kT0);
    ASSERT_TRUE(outcome.ok());
    for (StreamResult& r : outcome->results) results.push_back(r);
    ++windows;
  }
  EXPECT_GE(windows, 5);
  EXPECT_EQ(session->backlog_samples(), 0);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].transcript.text, DecodeWhole(Words, 20 * kRate / kFrame));
}

TEST(StreamingSession, RefusesSettingsThatDoNotFitTheLargestBucket) {
  GreedyCtcDecoder decoder(Symbols());
  StreamingSessionOptions options = Options();
  options.streaming.left_context_ms = 3500;
  absl::StatusOr<StreamingSession> session = StreamingSession::Create(options, &decoder);
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(), HasSubstr("largest bucket"));
}

TEST(StreamingSession, TooFewFramesFromTheModelIsAnInternalError) {
  GreedyCtcDecoder decoder(Symbols());
  absl::StatusOr<StreamingSession> session = StreamingSession::Create(Options(), &decoder);
  ASSERT_TRUE(session.ok());
  std::vector<float> second(kRate, 0.1f);
  session->AddAudio(second, kT0);
  std::optional<StreamWindow> window = session->NextWindow();
  ASSERT_TRUE(window.has_value());
  WindowLogProbs short_output{.values = std::vector<float>(kClasses, 0.0f), .frames = 1, .classes = kClasses};
  absl::StatusOr<WindowOutcome> outcome = session->OnWindowDone(short_output, kT0);
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInternal);
  EXPECT_FALSE(session->OnWindowDone(short_output, kT0).ok());  // nothing in flight any more
}

// On the shared tick (ticked): no window between ticks below two steps of new audio; at a tick half a step starts
// one; a tick that came while a window ran counts once it is done; two steps behind, or after the end of the audio,
// a window starts without a tick.
TEST(StreamingSession, TickedWindowsStartAtTicksOrWhenTwoStepsBehind) {
  StreamingSessionOptions options = Options();
  options.ticked = true;
  GreedyCtcDecoder decoder(Symbols());
  absl::StatusOr<StreamingSession> session = StreamingSession::Create(options, &decoder);
  ASSERT_TRUE(session.ok()) << session.status();
  const Script blank = [](int64_t) { return 0; };
  const int64_t step = 480 * kRate / 1000;
  const std::vector<float> audio(step, 0.1f);
  session->AddAudio(std::span<const float>(audio).first(step / 2 - kFrame), kT0);
  session->Tick();
  EXPECT_FALSE(session->NextWindow().has_value()) << "under half a step at the tick";
  session->AddAudio(std::span<const float>(audio).first(kFrame), kT0);
  std::optional<StreamWindow> first = session->NextWindow();  // the tick is still due: half a step now
  ASSERT_TRUE(first.has_value());
  session->AddAudio(audio, kT0);
  session->Tick();  // while `first` runs
  EXPECT_FALSE(session->NextWindow().has_value()) << "one window at a time";
  ASSERT_TRUE(session->OnWindowDone(RunScripted(*first, blank), kT0).ok());
  std::optional<StreamWindow> second = session->NextWindow();  // the tick that came meanwhile
  ASSERT_TRUE(second.has_value());
  ASSERT_TRUE(session->OnWindowDone(RunScripted(*second, blank), kT0).ok());
  session->AddAudio(audio, kT0);
  EXPECT_FALSE(session->NextWindow().has_value()) << "a step of new audio, no tick";
  session->AddAudio(audio, kT0);
  std::optional<StreamWindow> behind = session->NextWindow();  // two steps behind: no tick needed
  ASSERT_TRUE(behind.has_value());
  ASSERT_TRUE(session->OnWindowDone(RunScripted(*behind, blank), kT0).ok());
  session->AddAudio(std::span<const float>(audio).first(kFrame), kT0);
  EXPECT_FALSE(session->NextWindow().has_value());
  session->EndOfAudio(kT0);
  EXPECT_TRUE(session->NextWindow().has_value()) << "after the end of the audio";
}

}  // namespace
}  // namespace sluice::voice
