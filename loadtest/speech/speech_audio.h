// Audio as the Riva speech API takes it from the load generator: float samples as 16-bit PCM — whole WAV files
// (written by libsndfile) for Recognize, raw little-endian samples (LINEAR_PCM) for StreamingRecognize — and the
// arithmetic of cutting a recording into chunks sent at real time. A sample x becomes round(x × 32768) clipped
// to [-32768, 32767]: the inverse of libsndfile's reading (s / 32768), so 16-bit recordings go out bit-exact
// (libsndfile's own float writer scales by 32767 and would not).
// Thread-safety: plain values and pure functions.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::loadtest {

// The 16-bit samples of float samples (as above).
std::vector<int16_t> ToPcm16(std::span<const float> samples);
// A mono RIFF/WAV file of 16-bit PCM at `sample_rate`.
absl::StatusOr<std::string> EncodeWav(std::span<const float> samples, int sample_rate);
// Headerless 16-bit little-endian PCM, 2 bytes per sample (the same samples as EncodeWav's).
std::string EncodePcm16(std::span<const float> samples);

// A recording of `samples` cut into chunks of `chunk_samples` (the last one shorter when it does not divide).
struct ChunkPlan {
  int64_t samples = 0;
  int64_t chunk_samples = 1;
  int sample_rate = 1;

  int64_t chunks() const { return (samples + chunk_samples - 1) / chunk_samples; }
  int64_t begin(int64_t k) const { return k * chunk_samples; }
  int64_t end(int64_t k) const { return std::min(samples, (k + 1) * chunk_samples); }
  // Real time: chunk k is sent when the audio before it has played, begin(k) / rate seconds after chunk 0.
  double send_offset_s(int64_t k) const { return static_cast<double>(begin(k)) / sample_rate; }
  // The stream position its end reaches, in seconds (what a result's audio_processed must cover).
  double end_s(int64_t k) const { return static_cast<double>(end(k)) / sample_rate; }
};

// chunk_samples = round(sample_rate × chunk_ms / 1000), at least 1. REQUIRES: sample_rate > 0, chunk_ms > 0.
ChunkPlan PlanChunks(int64_t samples, int sample_rate, double chunk_ms);

}  // namespace sluice::loadtest
