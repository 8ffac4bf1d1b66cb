// Regression tests for the voice crashes and stalls of issue 23, against the real sluice-server process over
// loopback gRPC (Riva protos), on sim speech models (no graphs): long Recognize calls whose windows outnumber the
// model's queue (windows refused on the spot), Recognize with short random deadlines (windows refused as late),
// streams beyond the queue, and SIGTERM while a long Recognize and a stream are in flight (they finish; the server
// exits 0). Before the fix the first three ended the server with SIGSEGV and the drain answered "server is draining".
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"
#include "tests/server/server_process.h"
#include "tests/server/sim_models.h"
#include "tests/voice/riva_client.h"

namespace sluice {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::Pcm16;
using testing::Recognize;
using testing::RecognizeOutcome;
using testing::ServerProcess;
using testing::SimSpeech;
using testing::SimSpeechYaml;
using testing::Stream;
using testing::StreamOutcome;

// small_queue: 8 queued windows at most (a lone long file may fill it; two cannot share it). slow: 300 ms per
// batch, so a long file takes seconds. quick: 20 ms per batch.
testing::SimRepository& repository = testing::AddConfigRepository(
    "riva_robust", {{"small_queue", SimSpeechYaml(SimSpeech{.name = "small_queue", .max_queue_size = 8})},
                    {"slow", SimSpeechYaml(SimSpeech{.name = "slow", .base_ms = 300})},
                    {"quick", SimSpeechYaml(SimSpeech{.name = "quick", .base_ms = 20})}});

std::unique_ptr<testing::riva::RivaSpeechRecognition::Stub> Connect(const ServerProcess& server) {
  return testing::riva::RivaSpeechRecognition::NewStub(
      grpc::CreateChannel(server.grpc_address(), grpc::InsecureChannelCredentials()));
}

std::string Metrics(const ServerProcess& server) {
  httplib::Client http("127.0.0.1", server.http_port());
  auto result = http.Get("/metrics");
  return result ? result->body : "";
}

// Polls until `done` (10 s at most).
template <typename Predicate>
bool Soon(Predicate done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class RivaRobustnessTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new ServerProcess("", {"small_queue", "quick"}, repository.path()); }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(server_->ready()) << server_->Log(); }
  void TearDown() override {
    // Every test leaves the server alive and serving.
    ASSERT_TRUE(server_->alive()) << "the server died (exit " << server_->exit_code().value_or(0) << ")\n"
                                  << server_->Log();
    RecognizeOutcome after = Recognize(*Connect(*server_), "quick", Pcm16(10));
    EXPECT_TRUE(after.status.ok()) << after.status.error_message();
  }

  static ServerProcess* server_;
};
ServerProcess* RivaRobustnessTest::server_ = nullptr;

TEST_F(RivaRobustnessTest, LongRecognizeCallsBeyondTheQueueDepthAreEachAnsweredAndTheServerSurvives) {
  // 24 calls of 60 s (22 windows each, 8 in flight at a time): up to 192 windows for an 8-deep queue.
  constexpr int kCalls = 24;
  auto stub = Connect(*server_);
  const std::string audio = Pcm16(60);
  std::vector<RecognizeOutcome> outcomes(kCalls);
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) calls.emplace_back([&, i] { outcomes[i] = Recognize(*stub, "small_queue", audio); });
  for (std::thread& t : calls) t.join();
  int ok = 0;
  for (const RecognizeOutcome& outcome : outcomes) {
    if (outcome.status.ok()) {
      ++ok;
      EXPECT_EQ(outcome.results, 1);
      EXPECT_FLOAT_EQ(outcome.audio_processed, 60.0f);
    } else {
      EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << outcome.status.error_message();
      // Refused by the batcher's queue, or before that by audio-decode admission (decode_threads +
      // max_waiting_decodes = 18 < 24 calls): which one depends on how fast the decodes run on this machine.
      EXPECT_THAT(outcome.status.error_message(), AnyOf(HasSubstr("queue"), HasSubstr("audio decodes in progress")));
    }
  }
  std::printf("%d of %d long calls transcribed, the rest refused as overload\n", ok, kCalls);
  // Alone, a long file fits the queue: its own windows never overflow it.
  RecognizeOutcome alone = Recognize(*stub, "small_queue", audio);
  EXPECT_TRUE(alone.status.ok()) << alone.status.error_message();
  EXPECT_FLOAT_EQ(alone.audio_processed, 60.0f);
}

TEST_F(RivaRobustnessTest, RepeatedRecognizeWithShortRandomDeadlinesIsAnsweredEveryTime) {
  // 8 threads x 12 calls of 120 s (44 windows) with deadlines of 20-400 ms: windows refused as late, on the
  // submitting thread, while others of the same call are queued or running.
  constexpr int kThreads = 8, kCallsEach = 12;
  auto stub = Connect(*server_);
  const std::string audio = Pcm16(120);
  std::vector<std::vector<RecognizeOutcome>> outcomes(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(1234 + t);
      std::uniform_int_distribution<int> deadline_ms(20, 400);
      for (int i = 0; i < kCallsEach; ++i) {
        outcomes[t].push_back(Recognize(*stub, "quick", audio, std::chrono::milliseconds(deadline_ms(random))));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& thread_outcomes : outcomes) {
    ASSERT_EQ(thread_outcomes.size(), static_cast<size_t>(kCallsEach));
    for (const RecognizeOutcome& outcome : thread_outcomes) {
      if (outcome.status.ok()) {
        EXPECT_FLOAT_EQ(outcome.audio_processed, 120.0f);
      } else {
        EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << outcome.status.error_message();
      }
    }
  }
}

TEST_F(RivaRobustnessTest, StreamsBeyondTheQueueDepthEachEndWithAFinalOrAClearStatus) {
  // 32 streams of 20 s sent as fast as flow control allows: one window in flight each, 32 for an 8-deep queue.
  constexpr int kStreams = 32;
  auto stub = Connect(*server_);
  std::vector<StreamOutcome> outcomes(kStreams);
  std::vector<std::thread> streams;
  for (int i = 0; i < kStreams; ++i) streams.emplace_back([&, i] { outcomes[i] = Stream(*stub, "small_queue", 20); });
  for (std::thread& t : streams) t.join();
  int finished = 0;
  for (const StreamOutcome& outcome : outcomes) {
    finished += outcome.status.ok() ? 1 : 0;
    if (outcome.status.ok()) {
      EXPECT_EQ(outcome.finals, 1);
      EXPECT_FLOAT_EQ(outcome.last_processed, 20.0f);
    } else {
      EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << outcome.status.error_message();
    }
  }
  std::printf("%d of %d streams finished, the rest refused as overload\n", finished, kStreams);

  EXPECT_TRUE(Soon([&] {
    return Metrics(*server_).find("sluice_voice_streams_active{model=\"small_queue\"} 0") != std::string::npos;
  }));
}

TEST(RivaDrainTest, SigtermLetsALongRecognizeAndAnOpenStreamFinishRefusesNewCallsAndExitsZero) {
  ServerProcess server("drain_grace_seconds: 30\n", {"slow"}, repository.path());
  ASSERT_TRUE(server.ready()) << server.Log();
  auto stub = Connect(server);
  const auto shows = [&](const std::string& text) {
    return Soon([&] { return Metrics(server).find(text) != std::string::npos; });
  };

  // A stream, configured and fed 1 s of audio (so admitted), kept open across the signal.
  grpc::ClientContext stream_context;
  stream_context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = stub->StreamingRecognize(&stream_context);
  StreamOutcome streamed;
  std::thread reader([&] {
    testing::riva::StreamingRecognizeResponse response;
    while (stream->Read(&response)) {
      for (const auto& result : response.results()) {
        if (result.is_final()) ++streamed.finals;
        streamed.last_processed = result.audio_processed();
      }
    }
  });
  testing::riva::StreamingRecognizeRequest first;
  *first.mutable_streaming_config()->mutable_config() = testing::PcmConfig("slow");
  ASSERT_TRUE(stream->Write(first));
  testing::riva::StreamingRecognizeRequest audio;
  audio.set_audio_content(Pcm16(1));
  ASSERT_TRUE(stream->Write(audio));
  ASSERT_TRUE(shows("sluice_voice_streams_active{model=\"slow\"} 1")) << Metrics(server);

  // A long Recognize: 120 s, 44 windows, 16 in flight, 300 ms per batch of 8: seconds of work.
  RecognizeOutcome long_call;
  std::thread recognize([&] { long_call = Recognize(*stub, "slow", Pcm16(120)); });
  ASSERT_TRUE(shows("sluice_voice_audio_seconds_total{api=\"offline\",model=\"slow\"} 120")) << Metrics(server);

  server.Signal(SIGTERM);
  // Once the drain shows (not ready), a new call is refused.
  ASSERT_TRUE(Soon([&] {
    httplib::Client http("127.0.0.1", server.http_port());
    auto ready = http.Get("/v2/health/ready");
    return ready && ready->status != 200;
  }));
  RecognizeOutcome refused = Recognize(*stub, "slow", Pcm16(1));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("draining"));

  // The stream goes on through the drain: 2 s more, then its end.
  audio.set_audio_content(Pcm16(2));
  EXPECT_TRUE(stream->Write(audio));
  stream->WritesDone();
  reader.join();
  streamed.status = stream->Finish();
  recognize.join();

  EXPECT_TRUE(long_call.status.ok()) << long_call.status.error_message();
  EXPECT_FLOAT_EQ(long_call.audio_processed, 120.0f);
  EXPECT_TRUE(streamed.status.ok()) << streamed.status.error_message();
  EXPECT_EQ(streamed.finals, 1);
  EXPECT_FLOAT_EQ(streamed.last_processed, 3.0f);
  EXPECT_EQ(server.WaitExit(std::chrono::seconds(30)), 0) << server.Log();
  EXPECT_THAT(server.Log(), HasSubstr("drain complete"));
}

}  // namespace
}  // namespace sluice
