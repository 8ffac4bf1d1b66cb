// ReturnTracker on a hand-made timeline: closed-loop clients (every answered row comes back a fixed gap later)
// against open-loop arrivals (unrelated to answers).
#include "scheduler/return_tracker.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

constexpr absl::Duration kBatch = absl::Milliseconds(6);

class ReturnTrackerTest : public ::testing::Test {
 protected:
  // `cycles` batches of `rows`, each row's client back `gap` after its batch ended.
  void ClosedLoop(int cycles, int rows, absl::Duration gap) {
    for (int c = 0; c < cycles; ++c) {
      tracker_.NoteExecuted(now_, rows);
      for (int r = 0; r < rows; ++r) tracker_.NoteArrival(now_ + gap);
      now_ += kBatch;
    }
  }
  ReturnTracker tracker_;
  absl::Time now_ = absl::UnixEpoch();
};

TEST_F(ReturnTrackerTest, ClosedLoopClientsAreExpectedBackWithinTheUsualGap) {
  ClosedLoop(40, 2, absl::Microseconds(500));
  EXPECT_GT(tracker_.returned_share(), ReturnTracker::kClosedLoopShare);
  EXPECT_EQ(tracker_.usual_gap(), absl::Microseconds(500));

  tracker_.NoteExecuted(now_, 2);
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_), now_ + absl::Microseconds(500));
  tracker_.NoteArrival(now_ + absl::Microseconds(100));  // one of the two is back: the other is still expected
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_ + absl::Microseconds(100)), now_ + absl::Microseconds(500));
  tracker_.NoteArrival(now_ + absl::Microseconds(200));  // both back: nothing more is expected
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_ + absl::Microseconds(200)), absl::InfinitePast());
}

TEST_F(ReturnTrackerTest, ReturnsLaterThanTheUsualGapAreNotExpectedAnyLonger) {
  ClosedLoop(60, 1, absl::Microseconds(500));
  tracker_.NoteExecuted(now_, 1);
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_ + absl::Microseconds(499)), now_ + absl::Microseconds(500));
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_ + absl::Microseconds(500)), absl::InfinitePast());
}

TEST_F(ReturnTrackerTest, NothingIsExpectedUntilEnoughGapsAreKnown) {
  ClosedLoop(ReturnTracker::kMinGaps - 1, 1, absl::Microseconds(500));
  tracker_.NoteExecuted(now_, 1);
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_), absl::InfinitePast());
}

TEST_F(ReturnTrackerTest, OpenLoopArrivalsAreNotTakenForClosedLoopClients) {
  // Batches of 4 rows every 6 ms; arrivals every 5 ms whatever is answered (about one in the window per batch).
  absl::Time next_arrival = now_ + absl::Milliseconds(1);
  for (int c = 0; c < 200; ++c) {
    tracker_.NoteExecuted(now_, 4);
    while (next_arrival < now_ + kBatch) {
      tracker_.NoteArrival(next_arrival);
      next_arrival += absl::Milliseconds(5);
    }
    now_ += kBatch;
  }
  EXPECT_LT(tracker_.returned_share(), 0.5);
  tracker_.NoteExecuted(now_, 4);
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_), absl::InfinitePast());
}

TEST_F(ReturnTrackerTest, ClientsThatStopComingBackAreNoLongerAwaited) {
  ClosedLoop(40, 2, absl::Microseconds(500));
  for (int c = 0; c < 40; ++c) {  // answered, never back (the clients stopped)
    tracker_.NoteExecuted(now_, 2);
    now_ += kBatch;
  }
  tracker_.NoteExecuted(now_, 2);
  EXPECT_LT(tracker_.returned_share(), ReturnTracker::kClosedLoopShare);
  EXPECT_EQ(tracker_.ReturnsExpectedBy(now_), absl::InfinitePast());
}

TEST_F(ReturnTrackerTest, TheUsualGapIsTheNinetiethPercentileOfRecentGaps) {
  // 32 rows: 28 back after 300 us, 4 after 1.5 ms: the 90th percentile is the slow one.
  for (int c = 0; c < 32; ++c) {
    tracker_.NoteExecuted(now_, 1);
    tracker_.NoteArrival(now_ + (c % 8 == 0 ? absl::Microseconds(1500) : absl::Microseconds(300)));
    now_ += kBatch;
  }
  EXPECT_EQ(tracker_.usual_gap(), absl::Microseconds(1500));
  ClosedLoop(32, 1, absl::Microseconds(300));  // the slow ones leave the window of kept gaps
  EXPECT_EQ(tracker_.usual_gap(), absl::Microseconds(300));
}

}  // namespace
}  // namespace sluice
