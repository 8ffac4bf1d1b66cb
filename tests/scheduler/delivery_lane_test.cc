// DeliveryLane: posted work runs in order on one thread, Post's bound waits for the lane, Drain and the
// destructor run what is queued.
#include "scheduler/delivery_lane.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace sluice {
namespace {

TEST(DeliveryLaneTest, RunsPostsInOrderOnOneThreadThatIsNotThePosters) {
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  {
    DeliveryLane lane;
    for (int i = 0; i < 100; ++i) {
      lane.Post([&, i] {
        order.push_back(i);
        threads.push_back(std::this_thread::get_id());
      });
    }
  }  // the destructor runs what is queued
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (const auto& id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(DeliveryLaneTest, BoundedPostWaitsWhileMoreThanMaxQueuedWaitBehindARunningPost) {
  absl::Notification release, started;
  DeliveryLane lane;
  lane.Post([&] {
    started.Notify();
    release.WaitForNotification();
  });
  started.WaitForNotification();     // running, not queued
  lane.Post([] {}, /*max_queued=*/1);  // queue 0 -> 1: no wait
  lane.Post([] {}, /*max_queued=*/1);  // queue 1 -> 2: no wait (1 is not more than 1)
  std::atomic<bool> third_posted{false};
  std::thread poster([&] {
    lane.Post([] {}, /*max_queued=*/1);  // queue holds 2 > 1: waits for the lane
    third_posted = true;
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(third_posted.load()) << "a bounded post must wait while the lane is behind";
  lane.Post([] {});  // unbounded: never waits
  release.Notify();
  poster.join();
  EXPECT_TRUE(third_posted.load());
}

TEST(DeliveryLaneTest, DestructorRunsWhatIsQueued) {
  std::atomic<int> ran{0};
  {
    absl::Notification release;  // declared first: outlives the lane's thread
    DeliveryLane lane;
    lane.Post([&] { release.WaitForNotification(); });
    for (int i = 0; i < 10; ++i) lane.Post([&] { ++ran; });
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 10);
}

}  // namespace
}  // namespace sluice
