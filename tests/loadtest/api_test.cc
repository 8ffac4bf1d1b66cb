// The --api enum (parsed once, spelled back for the reports) and the in-flight call registry every gRPC callback
// client shares (core/call_registry.h).
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadtest/core/api.h"
#include "loadtest/core/call_registry.h"

namespace sluice::loadtest {
namespace {

TEST(ApiTest, EveryNameParsesToTheApiThatSpellsItBack) {
  ASSERT_EQ(ApiNames().size(), 6u);
  for (const std::string& name : ApiNames()) {
    absl::StatusOr<Api> api = ParseApi(name);
    ASSERT_TRUE(api.ok()) << name;
    EXPECT_EQ(ApiName(*api), name);
  }
  EXPECT_EQ(*ParseApi("riva-streaming"), Api::kRivaStreaming);
  EXPECT_TRUE(IsRivaApi(Api::kRivaOffline));
  EXPECT_FALSE(IsRivaApi(Api::kKServe));
  EXPECT_TRUE(IsGenerationApi(Api::kTritonStream));
  EXPECT_FALSE(IsGenerationApi(Api::kRivaStreaming));
  EXPECT_EQ(*ParseApi("openai-audio"), Api::kOpenAiAudio);
  EXPECT_FALSE(IsRivaApi(Api::kOpenAiAudio));
  EXPECT_TRUE(IsSpeechApi(Api::kOpenAiAudio));
  EXPECT_TRUE(IsWholeFileSpeechApi(Api::kOpenAiAudio));
  EXPECT_TRUE(IsWholeFileSpeechApi(Api::kRivaOffline));
  EXPECT_FALSE(IsWholeFileSpeechApi(Api::kRivaStreaming));
}

TEST(ApiTest, AnUnknownNameIsRefusedWithTheAcceptedOnes) {
  absl::StatusOr<Api> api = ParseApi("grpc");
  ASSERT_FALSE(api.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(api.status()));
  EXPECT_THAT(std::string(api.status().message()), testing::HasSubstr("kserve, riva-offline"));
}

struct FakeCall {
  int id = 0;
};

TEST(CallRegistryTest, KeepsCallsUntilRemovedAndWaitsForTheLast) {
  CallRegistry<FakeCall> registry;
  EXPECT_TRUE(registry.WaitIdle(absl::ZeroDuration()));
  FakeCall* a = registry.Add(std::make_shared<FakeCall>(FakeCall{1}));
  FakeCall* b = registry.Add(std::make_shared<FakeCall>(FakeCall{2}));
  EXPECT_EQ(registry.size(), 2);
  EXPECT_FALSE(registry.WaitIdle(absl::Milliseconds(20)));

  // A snapshot keeps its calls alive past their removal (CancelAll racing a finish).
  std::vector<std::shared_ptr<FakeCall>> snapshot = registry.Snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  std::shared_ptr<FakeCall> last_owner = registry.Remove(a);
  EXPECT_EQ(last_owner.use_count(), 2);  // the registry's reference came back; the snapshot holds the other
  EXPECT_EQ(registry.size(), 1);

  std::thread finisher([&] {
    absl::SleepFor(absl::Milliseconds(30));
    registry.Remove(b);
  });
  EXPECT_TRUE(registry.WaitIdle(absl::Seconds(10)));
  finisher.join();
  EXPECT_EQ(registry.size(), 0);
  EXPECT_EQ(snapshot[0]->id + snapshot[1]->id, 3);  // both still readable through the snapshot
}

}  // namespace
}  // namespace sluice::loadtest
