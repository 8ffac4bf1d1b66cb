// The audio a StreamingRecognize stream has received (stream_session.h), as both session kinds keep it: the
// samples not yet dropped (from base() to received()), when each client chunk arrived (so a run that finishes a
// chunk can report the chunk's latency), and when the audio ended.
// Thread-safety: none; the owning session's caller serialises every call.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "absl/time/time.h"

namespace sluice::voice {

class StreamAudio {
 public:
  // Samples after End are ignored.
  void Add(std::span<const float> samples, absl::Time now);
  void End(absl::Time now);  // once; later calls change nothing

  bool ended() const { return ended_; }
  absl::Time ended_at() const { return ended_at_; }
  int64_t received() const { return received_; }
  int64_t base() const { return base_; }

  // Samples [start, end) of the stream; base() <= start <= end <= received().
  std::vector<float> Slice(int64_t start, int64_t end) const;
  // Forgets the samples before `sample` (no earlier run needs them again).
  void DropBefore(int64_t sample);

  // now - arrival of every client chunk whose audio ends at or before `processed`, oldest first; each chunk is
  // reported once. The newest one's arrival is kept: last_done_arrival().
  std::vector<absl::Duration> TakeChunkLatencies(int64_t processed, absl::Time now);
  std::optional<absl::Time> last_done_arrival() const { return last_done_arrival_; }

 private:
  std::deque<float> samples_;  // stream samples [base_, received_)
  int64_t base_ = 0;
  int64_t received_ = 0;
  bool ended_ = false;
  absl::Time ended_at_;
  std::deque<std::pair<int64_t, absl::Time>> chunks_;  // (end sample, arrival) of chunks not yet reported
  std::optional<absl::Time> last_done_arrival_;
};

}  // namespace sluice::voice
