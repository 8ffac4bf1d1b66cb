// DecodeExecutor: work runs on the oneTBB arena, never on the submitting thread; admission is bounded by the count
// (running + waiting) and by the estimated bytes, refusing with ResourceExhausted and queueing nothing; a slot
// frees when its work ends, or at once when a waiting work is withdrawn (which then never runs, while a started one
// cannot be withdrawn); WaitIdle waits for everything admitted. Every decision is forced with notifications, never
// timed.
#include "server/voice/decode_executor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

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
  const absl::Status refused = executor.Submit(1, [] { ADD_FAILURE() << "a refused work ran"; }).status();
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
  const absl::Status refused = executor.Submit(1, [] { ADD_FAILURE() << "a refused work ran"; }).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), AllOf(HasSubstr("hold 500 bytes"), HasSubstr("voice.max_decode_bytes (100)")));
  release.Notify();
  executor.WaitIdle();
  // Within the bound, several are admitted at once.
  absl::Notification release2;
  ASSERT_TRUE(executor.Submit(60, [&] { release2.WaitForNotification(); }).ok());
  ASSERT_TRUE(executor.Submit(40, [&] { release2.WaitForNotification(); }).ok());
  EXPECT_EQ(executor.Submit(1, [] {}).status().code(), absl::StatusCode::kResourceExhausted);
  release2.Notify();
}

// A call cancelled (or past its deadline) while its decode waits: the decode gives its slot and bytes back at once,
// not when a thread reaches it, and never runs.
TEST(DecodeExecutorTest, AWithdrawnWaitingWorkFreesItsSlotAtOnceAndNeverRuns) {
  DecodeExecutor executor(DecodeLimits{.concurrency = 1, .max_waiting = 2, .max_bytes = 100});
  absl::Notification started, release;
  ASSERT_TRUE(executor.Submit(10, [&] {
                started.Notify();
                release.WaitForNotification();
              }).ok());
  started.WaitForNotification();  // the only thread is busy: what follows waits
  std::atomic<bool> withdrawn_ran{false};
  auto owned = std::make_shared<int>(0);  // the withdrawn work's captures go with it
  absl::StatusOr<DecodeTicket> first = executor.Submit(80, [&, owned] { withdrawn_ran = true; });
  ASSERT_TRUE(first.ok()) << first.status();
  absl::Notification second_ran;
  ASSERT_TRUE(executor.Submit(1, [&] { second_ran.Notify(); }).ok());
  EXPECT_EQ(executor.Submit(1, [] {}).status().code(), absl::StatusCode::kResourceExhausted);  // 3 of 3 slots

  EXPECT_TRUE(executor.Withdraw(*first));
  EXPECT_EQ(owned.use_count(), 1);
  EXPECT_EQ(executor.admitted(), 2);
  EXPECT_FALSE(executor.Withdraw(*first));  // only once
  // Its slot and its 80 bytes are free while the thread is still busy: 10 + 1 + 80 fits within 100 again.
  absl::Notification third_ran;
  absl::StatusOr<DecodeTicket> third = executor.Submit(80, [&] { third_ran.Notify(); });
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_NE(*third, *first);

  release.Notify();
  second_ran.WaitForNotification();
  third_ran.WaitForNotification();
  executor.WaitIdle();
  EXPECT_FALSE(withdrawn_ran.load());
  EXPECT_EQ(executor.admitted(), 0);
}

TEST(DecodeExecutorTest, AStartedWorkCannotBeWithdrawnAndRunsToItsEnd) {
  DecodeExecutor executor(DecodeLimits{.concurrency = 1, .max_waiting = 0, .max_bytes = 100});
  absl::Notification started, release;
  std::atomic<bool> finished{false};
  absl::StatusOr<DecodeTicket> running = executor.Submit(10, [&] {
    started.Notify();
    release.WaitForNotification();
    finished = true;
  });
  ASSERT_TRUE(running.ok()) << running.status();
  started.WaitForNotification();
  EXPECT_FALSE(executor.Withdraw(*running));
  EXPECT_EQ(executor.admitted(), 1);  // still holds its slot
  EXPECT_EQ(executor.Submit(1, [] {}).status().code(), absl::StatusCode::kResourceExhausted);
  release.Notify();
  executor.WaitIdle();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(executor.admitted(), 0);
  EXPECT_FALSE(executor.Withdraw(*running));  // nor once it has run
}

// Waiting works run oldest first, also around a withdrawn one.
TEST(DecodeExecutorTest, WaitingWorksRunInSubmissionOrder) {
  DecodeExecutor executor(DecodeLimits{.concurrency = 1, .max_waiting = 8, .max_bytes = 100});
  absl::Notification started, release;
  ASSERT_TRUE(executor.Submit(1, [&] {
                started.Notify();
                release.WaitForNotification();
              }).ok());
  started.WaitForNotification();
  Mutex mu;
  std::vector<int> order;
  std::vector<DecodeTicket> tickets;
  for (int i = 0; i < 6; ++i) {
    absl::StatusOr<DecodeTicket> ticket = executor.Submit(1, [&, i] {
      MutexLock lock(&mu);
      order.push_back(i);
    });
    ASSERT_TRUE(ticket.ok()) << ticket.status();
    tickets.push_back(*ticket);
  }
  EXPECT_TRUE(executor.Withdraw(tickets[2]));
  release.Notify();
  executor.WaitIdle();
  MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 3, 4, 5}));
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
