// The cache-aware streaming path on the exported asr_ctc_stream (backend/compile/asr_ctc_stream.py): the
// StreamStepBackend's scratch slot, the StreamEngine's shared tick and slots, and ChunkedSession's chunking and
// endpointing. The yardstick is the model's reference.pt: each case's offline output over the whole utterance (the
// same chunking), computed by the eager model alone at batch 1. Floats compared within tests/float_tolerance.h.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "backend/base/model_config.h"
#include "backend/base/stream_step_config.h"
#include "backend/reference_set.h"
#include "backend/stream_step_backend.h"
#include "server/voice/chunked_session.h"
#include "server/voice/stream_engine.h"
#include "tests/float_tolerance.h"

namespace sluice::voice {
namespace {

std::string ModelDir() {
  const char* dir = std::getenv("SLUICE_TEST_MODELS");
  return std::string(dir != nullptr ? dir : "build/models") + "/asr_ctc_stream";
}

class StreamEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<ModelConfig> config = LoadModelConfig(ModelDir());
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = new ModelConfig(*std::move(config));
    absl::StatusOr<std::optional<StreamStepOptions>> step = LoadStreamStepOptions(*config_);
    ASSERT_TRUE(step.ok() && step->has_value()) << step.status();
    InstanceOptions instance{config_, config_->instances.front(), 0, 1, nullptr};
    absl::StatusOr<std::unique_ptr<StreamStepBackend>> backend = StreamStepBackend::Create(instance, **step);
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = backend->release();
    absl::StatusOr<std::vector<ReferenceCase>> cases = LoadReferenceSet(ModelDir());
    ASSERT_TRUE(cases.ok()) << cases.status();
    cases_ = new std::vector<ReferenceCase>(*std::move(cases));
  }
  static void TearDownTestSuite() {
    delete backend_;
    delete config_;
    delete cases_;
  }

  static ModelConfig* config_;
  static StreamStepBackend* backend_;
  static std::vector<ReferenceCase>* cases_;
};

ModelConfig* StreamEngineTest::config_ = nullptr;
StreamStepBackend* StreamEngineTest::backend_ = nullptr;
std::vector<ReferenceCase>* StreamEngineTest::cases_ = nullptr;

std::vector<float> Noise(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 0.1f);
  std::vector<float> out(n);
  for (float& v : out) v = normal(rng);
  return out;
}

TEST_F(StreamEngineTest, PaddingRowsNeverTouchARealSlot) {
  const int64_t chunk = backend_->options().chunk_samples;
  std::vector<std::vector<float>> audio;
  for (int i = 0; i < 4; ++i) audio.push_back(Noise(chunk, 10 + i));
  StreamStepInput first{.batch_size = 4, .rows = {}};
  for (int slot = 0; slot < 3; ++slot) first.rows.push_back(StreamStepRow{slot, true, audio[slot]});
  ASSERT_TRUE(backend_->Step(first).ok());
  std::vector<std::vector<std::vector<float>>> before;
  for (int slot = 0; slot < 4; ++slot) before.push_back(*backend_->SlotState(slot));

  // One real row on slot 5 in the largest and a middle batch size: every other row is padding.
  for (int batch_size : {backend_->options().batch_sizes.back(), 8}) {
    StreamStepInput padded{.batch_size = batch_size, .rows = {StreamStepRow{5, false, audio[3]}}};
    absl::StatusOr<StreamStepOutput> out = backend_->Step(padded);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->rows, 1);
  }
  for (int slot = 0; slot < 4; ++slot) {
    EXPECT_EQ(*backend_->SlotState(slot), before[slot]) << "slot " << slot << " changed by another row's step";
  }
  EXPECT_NE(*backend_->SlotState(5), before[3]) << "the real row's own slot must have been written";
}

TEST_F(StreamEngineTest, RefusesRowsOutsideTheContract) {
  const std::vector<float> audio = Noise(backend_->options().chunk_samples + 1, 3);
  std::span<const float> too_long(audio);
  EXPECT_EQ(backend_->Step({.batch_size = 3, .rows = {StreamStepRow{0, true, too_long.first(10)}}}).status().code(),
            absl::StatusCode::kInvalidArgument);  // no such batch size
  EXPECT_EQ(backend_->Step({.batch_size = 1, .rows = {StreamStepRow{0, true, too_long}}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(backend_->Step({.batch_size = 2, .rows = {StreamStepRow{1, true, too_long.first(5)},
                                                     StreamStepRow{1, true, too_long.first(5)}}})
                .status().code(),
            absl::StatusCode::kInvalidArgument);  // a slot twice
  EXPECT_EQ(backend_->Step({.batch_size = 1, .rows = {StreamStepRow{backend_->options().slots, true,
                                                                   too_long.first(5)}}})
                .status().code(),
            absl::StatusCode::kInvalidArgument);  // the scratch slot is not the caller's
}

// One stream driven as the Riva reactor drives it: its audio arrives in client chunks of random sizes, each run's
// completion submits the next from the engine's thread.
struct Stream {
  StreamEngine* engine = nullptr;
  int slot = -1;
  std::optional<ChunkedSession> session;
  Mutex mu;
  std::vector<float> frames;  // every run's log-probs, in order
  std::vector<StreamResult> results;
  absl::Status error;
  absl::Notification done;

  void SubmitNext() {
    std::optional<StreamWindow> window;
    {
      MutexLock lock(&mu);
      window = session->NextWindow();
      if (!window) {
        if (std::optional<WindowOutcome> closing = session->TakeClosingResult(absl::Now())) {
          for (StreamResult& r : closing->results) results.push_back(r);
        }
        if (session->finished()) done.Notify();
        return;
      }
    }
    engine->Submit(slot, std::move(window->samples), window->start == 0,
                   [this](absl::StatusOr<WindowLogProbs> out) { OnChunk(std::move(out)); });
  }
  void OnChunk(absl::StatusOr<WindowLogProbs> out) {
    {
      MutexLock lock(&mu);
      if (!out.ok()) {
        error = out.status();
        done.Notify();
        return;
      }
      frames.insert(frames.end(), out->values.begin(), out->values.end());
      absl::StatusOr<WindowOutcome> outcome = session->OnWindowDone(*out, absl::Now());
      if (!outcome.ok()) {
        error = outcome.status();
        done.Notify();
        return;
      }
      for (StreamResult& r : outcome->results) results.push_back(r);
      if (session->finished()) {
        done.Notify();
        return;
      }
    }
    SubmitNext();
  }
};

TEST_F(StreamEngineTest, ServedStreamsEqualTheOfflineModelWhateverTheBatchAndClientChunks) {
  absl::StatusOr<std::unique_ptr<StreamEngine>> engine =
      StreamEngine::Create({.config = config_, .backend = backend_, .stats = nullptr, .metrics = nullptr});
  ASSERT_TRUE(engine.ok()) << engine.status();
  GreedyCtcDecoder decoder(SymbolTable{.symbols = config_->speech->vocabulary, .blank = 0, .word_separator = " "});
  std::mt19937 rng(42);
  // Two rounds: the second reuses the slots the first freed (their state must start afresh), and streams join
  // while others run (different batch companions and sizes every step).
  for (int round = 0; round < 2; ++round) {
    std::vector<std::unique_ptr<Stream>> streams;
    for (size_t c = 0; c < cases_->size(); ++c) {
      auto stream = std::make_unique<Stream>();
      stream->engine = engine->get();
      absl::StatusOr<int> slot = (*engine)->AcquireSlot();
      ASSERT_TRUE(slot.ok()) << slot.status();
      stream->slot = *slot;
      stream->session.emplace(*ChunkedSession::Create(
          ChunkedSessionOptions{.sample_rate = 16000, .frame_samples = config_->speech->frame_samples,
                                .chunk_samples = (*engine)->chunk_samples(), .blank = 0,
                                .endpoint = {}, .interim_results = true},
          &decoder));
      std::span<const float> audio = (*cases_)[c].inputs.front().values<float>();
      size_t at = 0;
      while (at < audio.size()) {  // client chunks of 1..5000 samples, never aligned to the model's chunks
        const size_t n = std::min<size_t>(audio.size() - at, 1 + rng() % 5000);
        MutexLock lock(&stream->mu);
        stream->session->AddAudio(audio.subspan(at, n), absl::Now());
        at += n;
      }
      {
        MutexLock lock(&stream->mu);
        stream->session->EndOfAudio(absl::Now());
      }
      streams.push_back(std::move(stream));
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      streams[i]->SubmitNext();
      if (static_cast<int>(i % 3) == round) absl::SleepFor(absl::Milliseconds(15));  // later streams join running steps
    }
    for (size_t c = 0; c < streams.size(); ++c) {
      Stream& s = *streams[c];
      ASSERT_TRUE(s.done.WaitForNotificationWithTimeout(absl::Seconds(120))) << "case " << c << " did not finish";
      MutexLock lock(&s.mu);
      ASSERT_TRUE(s.error.ok()) << s.error;
      std::span<const float> want = (*cases_)[c].outputs.front().values<float>();
      ASSERT_EQ(s.frames.size(), want.size()) << "case " << c << " (" << (*cases_)[c].length() << " samples)";
      double diff = 0;
      for (size_t i = 0; i < want.size(); ++i) diff = std::max(diff, std::abs(double{s.frames[i]} - want[i]));
      EXPECT_LE(diff, testing::CrossShapeTolerance(want)) << "case " << c << " round " << round;
      ASSERT_FALSE(s.results.empty());
      EXPECT_TRUE(s.results.back().is_final);
      (*engine)->ReleaseSlot(s.slot);
    }
  }
  const StreamEngine::Counters counters = (*engine)->counters();
  EXPECT_GT(counters.rows, counters.steps) << "streams must have shared steps";
  std::printf("%lld rows in %lld steps (%.2f rows per step)\n", static_cast<long long>(counters.rows),
              static_cast<long long>(counters.steps), static_cast<double>(counters.rows) / counters.steps);
}

TEST_F(StreamEngineTest, RefusesStreamsBeyondItsSlotsAndReusesFreedOnes) {
  absl::StatusOr<std::unique_ptr<StreamEngine>> engine =
      StreamEngine::Create({.config = config_, .backend = backend_, .stats = nullptr, .metrics = nullptr});
  ASSERT_TRUE(engine.ok());
  std::vector<int> slots;
  for (int i = 0; i < (*engine)->slots(); ++i) slots.push_back(*(*engine)->AcquireSlot());
  absl::StatusOr<int> extra = (*engine)->AcquireSlot();
  EXPECT_EQ(extra.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(extra.status().message().find("asr_ctc_stream"), std::string::npos) << extra.status();
  (*engine)->ReleaseSlot(slots[7]);
  absl::StatusOr<int> again = (*engine)->AcquireSlot();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, slots[7]);
  // A chunk still queued when its stream leaves completes Cancelled; a stopped engine refuses new chunks.
  (*engine)->Stop();
  absl::Status status;
  (*engine)->Submit(*again, std::vector<float>(10, 0.f), true,
                    [&](absl::StatusOr<WindowLogProbs> out) { status = out.status(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
}

// ChunkedSession alone, on scripted log-probs: finals at endpoints mid-stream, Riva's endpointing fields.
WindowLogProbs Scripted(int64_t frames, const std::vector<int>& best) {
  WindowLogProbs out{.values = std::vector<float>(frames * 3, -10.f), .frames = frames, .classes = 3};
  for (int64_t f = 0; f < frames; ++f) out.values[f * 3 + best[f]] = 0.f;
  return out;
}

TEST(ChunkedSessionTest, SendsAFinalAtEachEndpointMidStream) {
  GreedyCtcDecoder decoder(SymbolTable{.symbols = {"<b>", "a", " "}, .blank = 0, .word_separator = " "});
  // 4 frames per chunk; endpoint after 8 blank frames (320 ms of 40 ms frames).
  absl::StatusOr<ChunkedSession> session = ChunkedSession::Create(
      {.sample_rate = 16000, .frame_samples = 640, .chunk_samples = 2560, .blank = 0,
       .endpoint = {.stop_history_ms = 320}, .interim_results = true},
      &decoder);
  ASSERT_TRUE(session.ok());
  session->AddAudio(std::vector<float>(2560 * 8, 0.f), absl::Now());
  session->EndOfAudio(absl::Now());
  // Chunks: speech, blank, blank (endpoint), blank, speech, blank, blank (endpoint), blank (end of audio).
  const std::vector<std::vector<int>> script = {{1, 1, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0},
                                                {0, 1, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}};
  std::vector<bool> finals;
  std::vector<std::string> texts;
  for (const std::vector<int>& best : script) {
    std::optional<StreamWindow> window = session->NextWindow();
    ASSERT_TRUE(window.has_value());
    EXPECT_EQ(window->end - window->start, 2560);
    absl::StatusOr<WindowOutcome> outcome = session->OnWindowDone(Scripted(4, best), absl::Now());
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ASSERT_EQ(outcome->results.size(), 1u);
    finals.push_back(outcome->results.front().is_final);
    if (finals.back()) texts.push_back(outcome->results.front().transcript.text);
  }
  EXPECT_EQ(finals, (std::vector<bool>{false, false, true, false, false, false, true, true}));
  EXPECT_EQ(texts, (std::vector<std::string>{"a", "a", ""}));  // the last segment (end of audio) is all blank
  EXPECT_TRUE(session->finished());
}

TEST(ChunkedSessionTest, StopThresholdAllowsSomeSpeechInTheStopWindow) {
  GreedyCtcDecoder decoder(SymbolTable{.symbols = {"<b>", "a", " "}, .blank = 0, .word_separator = " "});
  absl::StatusOr<ChunkedSession> session = ChunkedSession::Create(
      {.sample_rate = 16000, .frame_samples = 640, .chunk_samples = 2560, .blank = 0,
       .endpoint = {.stop_history_ms = 320, .stop_threshold = 0.75f}, .interim_results = false},
      &decoder);
  ASSERT_TRUE(session.ok());
  session->AddAudio(std::vector<float>(2560 * 3, 0.f), absl::Now());
  ASSERT_TRUE(session->NextWindow().has_value());
  ASSERT_TRUE(session->OnWindowDone(Scripted(4, {1, 0, 0, 0}), absl::Now())->results.empty());
  ASSERT_TRUE(session->NextWindow().has_value());
  // 8 frames, 6 blank (0.75 of them): an endpoint with threshold 0.75, not with the default 1.
  absl::StatusOr<WindowOutcome> outcome = session->OnWindowDone(Scripted(4, {1, 0, 0, 0}), absl::Now());
  ASSERT_TRUE(outcome.ok());
  ASSERT_EQ(outcome->results.size(), 1u);
  EXPECT_TRUE(outcome->results.front().is_final);
}

TEST(ChunkedSessionTest, RefusesEndpointFieldsOutOfRange) {
  GreedyCtcDecoder decoder(SymbolTable{.symbols = {"<b>", "a"}, .blank = 0, .word_separator = " "});
  EXPECT_EQ(ChunkedSession::Create({.endpoint = {.stop_threshold = 1.5f}}, &decoder).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChunkedSession::Create({.endpoint = {.start_history_ms = -1}}, &decoder).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChunkedSession::Create({.frame_samples = 640, .chunk_samples = 1000, .endpoint = {}}, &decoder).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sluice::voice
