// DecodeExecutor: work runs on the oneTBB arena, never on the submitting thread; admission is bounded by the count
// (running + waiting) and by the estimated bytes, refusing with ResourceExhausted and queueing nothing; a slot
// frees when its work ends; WaitIdle waits for everything admitted. Every decision is forced with notifications,
// never timed.
#include "server/voice/decode_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"

namespace sluice::voice {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(DecodeExecutorTest, WorkRunsOffTheSubmittingThread) {
  DecodeExecutor executor(DecodeLimits{.concurrency = 1, .max_waiting = 0, .max_bytes = 100});
  absl::Notification ran;
  std::thread::id where;
  ASSERT_TRUE(executor.Submit(10, [&] {
                where = std::this_thread::get_id();
                ran.Notify();
              }).ok());
  ran.WaitForNotification();
  EXPECT_NE(where, std::this_thread::get_id());
  executor.WaitIdle();
  EXPECT_EQ(executor.admitted(), 0);
}

TEST(DecodeExecutorTest, RefusesBeyondRunningPlusWaitingAndAdmitsAgainWhenASlotFrees) {
  DecodeExecutor executor(DecodeLimits{.concurrency = 1, .max_waiting = 2, .max_bytes = 1 << 20});
  absl::Notification release;
  std::atomic<int> done{0};
  auto blocked = [&] {
    release.WaitForNotification();
    ++done;
  };
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(executor.Submit(1, blocked).ok()) << i;
  EXPECT_EQ(executor.admitted(), 3);
  const absl::Status refused = executor.Submit(1, [] { ADD_FAILURE() << "a refused work ran"; });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), AllOf(HasSubstr("too many audio decodes"), HasSubstr("1 running and 2 waiting"),
                                       HasSubstr("voice.max_waiting_decodes")));
  release.Notify();
  executor.WaitIdle();
  EXPECT_EQ(done.load(), 3);
  EXPECT_EQ(executor.admitted(), 0);
  absl::Notification again;
  EXPECT_TRUE(executor.Submit(1, [&] { again.Notify(); }).ok());
  again.WaitForNotification();
}

TEST(DecodeExecutorTest, BoundsTheAdmittedBytesButAlwaysAdmitsOneWhenIdle) {
  DecodeExecutor executor(DecodeLimits{.concurrency = 2, .max_waiting = 8, .max_bytes = 100});
  absl::Notification release;
  // Larger than the bound, but nothing else is admitted: its size is the model's limit's to bound.
  ASSERT_TRUE(executor.Submit(500, [&] { release.WaitForNotification(); }).ok());
  const absl::Status refused = executor.Submit(1, [] { ADD_FAILURE() << "a refused work ran"; });
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), AllOf(HasSubstr("hold 500 bytes"), HasSubstr("voice.max_decode_bytes (100)")));
  release.Notify();
  executor.WaitIdle();
  // Within the bound, several are admitted at once.
  absl::Notification release2;
  ASSERT_TRUE(executor.Submit(60, [&] { release2.WaitForNotification(); }).ok());
  ASSERT_TRUE(executor.Submit(40, [&] { release2.WaitForNotification(); }).ok());
  EXPECT_EQ(executor.Submit(1, [] {}).code(), absl::StatusCode::kResourceExhausted);
  release2.Notify();
}

TEST(DecodeExecutorTest, TheDestructorWaitsForAdmittedWork) {
  std::atomic<int> done{0};
  {
    DecodeExecutor executor(DecodeLimits{.concurrency = 1, .max_waiting = 4, .max_bytes = 100});
    for (int i = 0; i < 4; ++i) {
      ASSERT_TRUE(executor.Submit(1, [&] {
                    std::this_thread::yield();
                    ++done;
                  }).ok());
    }
  }
  EXPECT_EQ(done.load(), 4);
}

}  // namespace
}  // namespace sluice::voice
