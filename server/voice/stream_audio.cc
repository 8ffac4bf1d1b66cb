#include "server/voice/stream_audio.h"

namespace sluice::voice {

void StreamAudio::Add(std::span<const float> samples, absl::Time now) {
  if (samples.empty() || ended_) return;
  samples_.insert(samples_.end(), samples.begin(), samples.end());
  received_ += static_cast<int64_t>(samples.size());
  chunks_.emplace_back(received_, now);
}

void StreamAudio::End(absl::Time now) {
  if (ended_) return;
  ended_ = true;
  ended_at_ = now;
}

std::vector<float> StreamAudio::Slice(int64_t start, int64_t end) const {
  return std::vector<float>(samples_.begin() + (start - base_), samples_.begin() + (end - base_));
}

void StreamAudio::DropBefore(int64_t sample) {
  if (sample <= base_) return;
  samples_.erase(samples_.begin(), samples_.begin() + (sample - base_));
  base_ = sample;
}

std::vector<absl::Duration> StreamAudio::TakeChunkLatencies(int64_t processed, absl::Time now) {
  std::vector<absl::Duration> latencies;
  while (!chunks_.empty() && chunks_.front().first <= processed) {
    latencies.push_back(now - chunks_.front().second);
    last_done_arrival_ = chunks_.front().second;
    chunks_.pop_front();
  }
  return latencies;
}

}  // namespace sluice::voice
