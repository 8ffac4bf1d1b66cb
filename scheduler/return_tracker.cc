#include "scheduler/return_tracker.h"

#include <algorithm>

namespace sluice {

void ReturnTracker::NoteExecuted(absl::Time at, int rows) {
  ForgetOlderThan(at - kReturnWindow);
  if (rows > 0) out_.push_back({at, rows});
}

void ReturnTracker::NoteArrival(absl::Time at) {
  ForgetOlderThan(at - kReturnWindow);
  if (out_.empty()) return;
  RowsOut& oldest = out_.front();
  NoteGap(at - oldest.executed);
  NoteShare(1.0);
  if (--oldest.rows == 0) out_.pop_front();
}

absl::Time ReturnTracker::ReturnsExpectedBy(absl::Time now) const {
  // Rows of older batches whose window has closed may still be listed (forgotten at the next note); they do not
  // matter here: the last batch's end plus the usual gap (at most the window) is the answer.
  if (out_.empty() || gap_count_ < kMinGaps || returned_share_ < kClosedLoopShare) return absl::InfinitePast();
  const absl::Time by = out_.back().executed + usual_gap_;
  return by > now ? by : absl::InfinitePast();
}

void ReturnTracker::ForgetOlderThan(absl::Time t) {
  while (!out_.empty() && out_.front().executed < t) {
    for (int i = 0; i < out_.front().rows; ++i) NoteShare(0.0);
    out_.pop_front();
  }
}

void ReturnTracker::NoteShare(double returned) {
  returned_share_ += (returned - returned_share_) / kShareRows;
}

void ReturnTracker::NoteGap(absl::Duration gap) {
  gaps_[gap_count_ % kGapSamples] = gap;
  ++gap_count_;
  if (gap_count_ < kMinGaps) return;
  // Recomputed per arrival: 32 values, a partial sort (no allocation).
  std::array<absl::Duration, kGapSamples> sorted = gaps_;
  const size_t n = std::min(gap_count_, kGapSamples);
  const size_t p90 = (n * 9) / 10;  // index of the 90th percentile in the n known gaps
  std::nth_element(sorted.begin(), sorted.begin() + p90, sorted.begin() + n);
  usual_gap_ = sorted[p90];
}

}  // namespace sluice
