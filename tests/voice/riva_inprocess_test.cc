// The Riva service in-process (no Server class, no libtorch): sim speech models behind ServedModel and a ModelHub,
// the service on a loopback gRPC server, driven by gRPC clients. The same overloads as riva_robustness_test.cc
// (windows refused on the spot: full queue, late deadline), cancellations, and a drain — so that the voice front
// end's reactors and recognitions run under ASan/UBSan and TSan (tests/asan, tests/sanitizers), which instrument
// only what they compile, not a server process.
#include <grpcpp/grpcpp.h>

#include <deque>
#include <future>
#include <random>
#include <thread>
#include <vector>

#include "backend/base/model_config.h"
#include "backend/sim_backend.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/hub/model_hub.h"
#include "server/metrics/server_metrics.h"
#include "server/voice/riva_service.h"
#include "tests/server/model_yaml.h"
#include "tests/voice/riva_client.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;
using testing::Pcm16;
using testing::Recognize;
using testing::RecognizeOutcome;
using testing::SimSpeech;
using testing::SimSpeechYaml;
using testing::Stream;
using testing::StreamOutcome;

// The service over `models`, listening on a loopback port; torn down in dependency order.
class InProcessRiva {
 public:
  explicit InProcessRiva(const std::vector<SimSpeech>& models) {
    std::vector<std::unique_ptr<ServedModel>> served;
    for (const SimSpeech& model : models) {
      const ModelConfig& config = configs_.emplace_back(testing::ParseModelYaml(SimSpeechYaml(model)));
      ServedModelOptions options;
      options.config = &config;
      for (const InstanceGroup& group : config.instances) {
        for (int replica = 0; replica < group.count; ++replica) {
          absl::StatusOr<std::unique_ptr<Backend>> backend =
              CreateSimBackend(InstanceOptions{.model = &config, .group = group, .replica = replica});
          EXPECT_TRUE(backend.ok()) << backend.status();
          options.instances.push_back(backends_.emplace_back(*std::move(backend)).get());
        }
      }
      options.state = &hub_.state();
      options.metrics = &metrics_;
      absl::StatusOr<std::unique_ptr<ServedModel>> one = ServedModel::Create(options);
      EXPECT_TRUE(one.ok()) << one.status();
      served.push_back(*std::move(one));
    }
    hub_.Publish(std::move(served));
    hub_.state().SetReady();
    service_ = std::make_unique<voice::RivaAsrService>(&hub_, "");
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    builder.SetMaxReceiveMessageSize(64 << 20);
    server_ = builder.BuildAndStart();
    EXPECT_NE(port, 0);
    stub_ = testing::riva::RivaSpeechRecognition::NewStub(
        grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  ~InProcessRiva() {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    server_.reset();
    hub_.StopAll();  // every window still queued is answered before the models go
  }

  testing::riva::RivaSpeechRecognition::Stub& stub() { return *stub_; }
  ModelHub& hub() { return hub_; }

 private:
  std::deque<ModelConfig> configs_;  // element addresses are stable
  std::vector<std::unique_ptr<Backend>> backends_;
  ServerMetrics metrics_{absl::Now(), std::nullopt};
  ModelHub hub_{&metrics_};
  std::unique_ptr<voice::RivaAsrService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<testing::riva::RivaSpeechRecognition::Stub> stub_;
};

bool IsOneOf(const grpc::Status& status, std::initializer_list<grpc::StatusCode> codes) {
  for (grpc::StatusCode code : codes) {
    if (status.error_code() == code) return true;
  }
  return false;
}

TEST(RivaInProcessTest, LongRecognizeCallsBeyondTheQueueDepthAreEachAnswered) {
  InProcessRiva riva({SimSpeech{.name = "small_queue", .max_queue_size = 8}});
  constexpr int kCalls = 12;  // 30 s each: 11 windows, 8 in flight: up to 96 for an 8-deep queue
  const std::string audio = Pcm16(30);
  std::vector<RecognizeOutcome> outcomes(kCalls);
  std::vector<std::thread> calls;
  for (int i = 0; i < kCalls; ++i) {
    calls.emplace_back([&, i] { outcomes[i] = Recognize(riva.stub(), "small_queue", audio); });
  }
  for (std::thread& t : calls) t.join();
  for (const RecognizeOutcome& outcome : outcomes) {
    EXPECT_TRUE(IsOneOf(outcome.status, {grpc::StatusCode::OK, grpc::StatusCode::RESOURCE_EXHAUSTED}))
        << outcome.status.error_code() << " " << outcome.status.error_message();
    if (outcome.status.ok()) {
      EXPECT_FLOAT_EQ(outcome.audio_processed, 30.0f);
    }
  }
  EXPECT_TRUE(Recognize(riva.stub(), "small_queue", audio).status.ok());
}

TEST(RivaInProcessTest, RecognizeWithShortRandomDeadlinesIsAnsweredEveryTime) {
  InProcessRiva riva({SimSpeech{.name = "quick", .base_ms = 10}});
  constexpr int kThreads = 4, kCallsEach = 8;
  const std::string audio = Pcm16(60);
  std::vector<std::thread> threads;
  std::vector<std::vector<RecognizeOutcome>> outcomes(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(99 + t);
      std::uniform_int_distribution<int> deadline_ms(10, 200);
      for (int i = 0; i < kCallsEach; ++i) {
        outcomes[t].push_back(Recognize(riva.stub(), "quick", audio, std::chrono::milliseconds(deadline_ms(random))));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& each : outcomes) {
    ASSERT_EQ(each.size(), static_cast<size_t>(kCallsEach));
    for (const RecognizeOutcome& outcome : each) {
      EXPECT_TRUE(IsOneOf(outcome.status, {grpc::StatusCode::OK, grpc::StatusCode::DEADLINE_EXCEEDED}))
          << outcome.status.error_code() << " " << outcome.status.error_message();
    }
  }
  const RecognizeOutcome after = Recognize(riva.stub(), "quick", audio);
  EXPECT_TRUE(after.status.ok()) << after.status.error_code() << " " << after.status.error_message();
}

TEST(RivaInProcessTest, StreamsBeyondTheQueueDepthEachEndWithAFinalOrAClearStatus) {
  InProcessRiva riva({SimSpeech{.name = "small_queue", .max_queue_size = 4}});
  constexpr int kStreams = 16;  // one window in flight each: 16 for a 4-deep queue
  std::vector<StreamOutcome> outcomes(kStreams);
  std::vector<std::thread> streams;
  for (int i = 0; i < kStreams; ++i) streams.emplace_back([&, i] { outcomes[i] = Stream(riva.stub(), "small_queue", 10); });
  for (std::thread& t : streams) t.join();
  int finished = 0;
  for (const StreamOutcome& outcome : outcomes) {
    finished += outcome.status.ok() ? 1 : 0;
    EXPECT_TRUE(IsOneOf(outcome.status, {grpc::StatusCode::OK, grpc::StatusCode::RESOURCE_EXHAUSTED}))
        << outcome.status.error_code() << " " << outcome.status.error_message();
    if (outcome.status.ok()) {
      EXPECT_FLOAT_EQ(outcome.last_processed, 10.0f);
    }
  }
  std::printf("%d of %d streams finished, the rest refused as overload\n", finished, kStreams);

  EXPECT_TRUE(Stream(riva.stub(), "small_queue", 2).status.ok());
}

TEST(RivaInProcessTest, CallsAndStreamsCancelledMidWayReleaseEverything) {
  InProcessRiva riva({SimSpeech{.name = "quick", .base_ms = 10}});
  const std::string audio = Pcm16(60);
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      // A Recognize cancelled after 0-70 ms.
      testing::riva::RecognizeRequest request;
      *request.mutable_config() = testing::PcmConfig("quick");
      request.set_audio(audio);
      testing::riva::RecognizeResponse response;
      grpc::ClientContext context;
      std::thread canceller([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10 * i));
        context.TryCancel();
      });
      const grpc::Status status = riva.stub().Recognize(&context, request, &response);
      canceller.join();
      EXPECT_TRUE(IsOneOf(status, {grpc::StatusCode::OK, grpc::StatusCode::CANCELLED})) << status.error_message();
    });
    clients.emplace_back([&, i] {
      // A stream cancelled after 0-70 ms of sending.
      grpc::ClientContext context;
      auto stream = riva.stub().StreamingRecognize(&context);
      testing::riva::StreamingRecognizeRequest first;
      *first.mutable_streaming_config()->mutable_config() = testing::PcmConfig("quick");
      stream->Write(first);
      const auto cancel_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(10 * i);
      testing::riva::StreamingRecognizeRequest chunk;
      chunk.set_audio_content(Pcm16(0.5));
      while (std::chrono::steady_clock::now() < cancel_at && stream->Write(chunk)) {
      }
      context.TryCancel();
      testing::riva::StreamingRecognizeResponse ignored;
      while (stream->Read(&ignored)) {
      }
      const grpc::Status status = stream->Finish();
      EXPECT_TRUE(IsOneOf(status, {grpc::StatusCode::OK, grpc::StatusCode::CANCELLED})) << status.error_message();
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(Recognize(riva.stub(), "quick", Pcm16(10)).status.ok());
  // Every admission was given back (the reactors were deleted) once the calls ended.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (riva.hub().state().admitted_calls() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(riva.hub().state().admitted_calls(), 0);
}

// Streams on the shared tick (WindowTicker) that end every way at once: cancelled mid-way, at various times
// relative to the ticks, and finished (faster than real time, so windows also start off the tick); every reactor
// unregisters from the ticker before it goes (under TSan: no tick may run on a deleted reactor).
TEST(RivaInProcessTest, StreamsOnTheSharedTickEndingEveryWayReleaseEverything) {
  InProcessRiva riva({SimSpeech{.name = "ticked", .base_ms = 10, .shared_tick = true}});
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&, i] {
      grpc::ClientContext context;
      auto stream = riva.stub().StreamingRecognize(&context);
      testing::riva::StreamingRecognizeRequest first;
      *first.mutable_streaming_config()->mutable_config() = testing::PcmConfig("ticked");
      stream->Write(first);
      testing::riva::StreamingRecognizeRequest chunk;
      chunk.set_audio_content(Pcm16(0.1));
      const bool cancel = i % 2 == 0;
      // 100 ms chunks every 25 ms: 4x real time, for 0.3 s to 1.0 s of sending.
      const auto stop_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(300 + 100 * i);
      while (std::chrono::steady_clock::now() < stop_at && stream->Write(chunk)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
      }
      if (cancel) {
        context.TryCancel();
      } else {
        stream->WritesDone();
      }
      testing::riva::StreamingRecognizeResponse ignored;
      while (stream->Read(&ignored)) {
      }
      const grpc::Status status = stream->Finish();
      if (cancel) {
        EXPECT_TRUE(IsOneOf(status, {grpc::StatusCode::OK, grpc::StatusCode::CANCELLED}))
            << i << ": " << status.error_code() << " " << status.error_message();
      } else {
        EXPECT_TRUE(status.ok()) << i << ": " << status.error_code() << " " << status.error_message();
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_TRUE(Stream(riva.stub(), "ticked", 2).status.ok());
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (riva.hub().state().admitted_calls() != 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(riva.hub().state().admitted_calls(), 0);
}

TEST(RivaInProcessTest, ADrainLetsAdmittedCallsFinishAndRefusesNewOnes) {
  InProcessRiva riva({SimSpeech{.name = "slow", .base_ms = 200}});
  // A long Recognize (60 s: 22 windows, 16 in flight, 200 ms per batch of 8) and a stream, both admitted.
  RecognizeOutcome long_call;
  std::thread recognize([&] { long_call = Recognize(riva.stub(), "slow", Pcm16(60)); });
  grpc::ClientContext stream_context;
  auto stream = riva.stub().StreamingRecognize(&stream_context);
  testing::riva::StreamingRecognizeRequest first;
  *first.mutable_streaming_config()->mutable_config() = testing::PcmConfig("slow");
  ASSERT_TRUE(stream->Write(first));
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (riva.hub().state().admitted_calls() < 2 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(riva.hub().state().admitted_calls(), 2);

  riva.hub().state().BeginDrain();
  std::future<void> drained = std::async(std::launch::async, [&] { riva.hub().state().WaitForAdmittedCalls(); });
  const RecognizeOutcome refused = Recognize(riva.stub(), "slow", Pcm16(1));
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("draining"));

  testing::riva::StreamingRecognizeRequest audio;
  audio.set_audio_content(Pcm16(3));
  EXPECT_TRUE(stream->Write(audio));
  stream->WritesDone();
  float last_processed = 0;
  int finals = 0;
  testing::riva::StreamingRecognizeResponse response;
  while (stream->Read(&response)) {
    for (const auto& result : response.results()) {
      finals += result.is_final() ? 1 : 0;
      last_processed = result.audio_processed();
    }
  }
  const grpc::Status stream_status = stream->Finish();
  recognize.join();
  EXPECT_TRUE(stream_status.ok()) << stream_status.error_message();
  EXPECT_EQ(finals, 1);
  EXPECT_FLOAT_EQ(last_processed, 3.0f);
  EXPECT_TRUE(long_call.status.ok()) << long_call.status.error_message();
  EXPECT_FLOAT_EQ(long_call.audio_processed, 60.0f);
  EXPECT_EQ(drained.wait_for(std::chrono::seconds(10)), std::future_status::ready);
}

}  // namespace
}  // namespace sluice
