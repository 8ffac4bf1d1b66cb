// When the clients just answered will be back: the dynamic batcher's view of closed-loop traffic
// (batching.await_returns, scheduler/dynamic_batcher.h).
//
// A closed-loop client sends its next request when its answer arrives, so the rows of a batch whose graph just
// returned come back as new requests a "return gap" later (answering, the network, the client's turn-around). The
// tracker pairs arrivals with rows still out: an arrival within kReturnWindow of a batch's end, while rows of that
// batch are unpaired, counts as one of their returns (oldest batch first). From the pairs it keeps
//   - the share of executed rows that came back within the window (close to 1 for closed-loop clients; for
//     open-loop traffic only the chance that an unrelated arrival falls in the window, far lower unless arrivals
//     are many per batch), and
//   - the recent return gaps, whose 90th percentile is the usual gap.
// ReturnsExpectedBy() says until when rows still out should be back: only while the returned share is at least
// kClosedLoopShare and enough gaps are known; otherwise nothing is expected and the batcher never waits for returns.
//
// Thread-safety: none. The DynamicBatcher calls it under its one mutex.
#pragma once

#include <array>
#include <cstddef>
#include <deque>

#include "absl/time/time.h"

namespace sluice {

class ReturnTracker {
 public:
  // An arrival later than this after a batch's end is not taken as one of its rows' returns.
  static constexpr absl::Duration kReturnWindow = absl::Milliseconds(3);
  // The returned share (over roughly the last kShareRows rows) at which traffic counts as closed-loop.
  static constexpr double kClosedLoopShare = 0.8;
  static constexpr int kShareRows = 32;
  // Return gaps kept, and how many must be known before any return is expected.
  static constexpr size_t kGapSamples = 32;
  static constexpr size_t kMinGaps = 8;

  // A batch of `rows` requests finished executing at `at` (their answers go out now). `at` never decreases.
  void NoteExecuted(absl::Time at, int rows);
  // A request arrived at `at` (never earlier than the last call's time).
  void NoteArrival(absl::Time at);

  // When the rows still out should all be back (the last batch's end plus the usual gap), if traffic looks
  // closed-loop, rows are out, and that time is after `now`; InfinitePast otherwise.
  absl::Time ReturnsExpectedBy(absl::Time now) const;

  double returned_share() const { return returned_share_; }
  // The 90th percentile of the recent return gaps; zero until kMinGaps are known.
  absl::Duration usual_gap() const { return usual_gap_; }

 private:
  struct RowsOut {
    absl::Time executed;
    int rows;
  };
  // Rows whose return window closed before `t` count as not returned.
  void ForgetOlderThan(absl::Time t);
  void NoteShare(double returned);  // one row's outcome (1 returned, 0 not)
  void NoteGap(absl::Duration gap);

  std::deque<RowsOut> out_;  // oldest batch first; entries with rows > 0 only
  double returned_share_ = 0;
  std::array<absl::Duration, kGapSamples> gaps_{};
  size_t gap_count_ = 0;  // total seen; gaps_[i % kGapSamples]
  absl::Duration usual_gap_ = absl::ZeroDuration();
};

}  // namespace sluice
