// The bucket advisor's traffic from recordings: the length of every audio file in a folder (loadtest's
// ProbeAudioFolder: headers only, not its subfolders) in the model's samples. A file at another sample rate counts
// as the length it would have resampled to the model's rate, ceil(frames · model_rate / file_rate) (rounded up,
// so that it still fits). Empty files are skipped and counted.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::advisor {

struct AudioLengths {
  std::vector<int64_t> lengths;  // one per non-empty file, in samples at the model's rate, sorted by file name
  int64_t resampled = 0;         // files at another sample rate
  int64_t empty = 0;             // files with no frames, skipped
  std::vector<int> other_rates;  // those other sample rates, ascending, distinct

  // "N recordings in DIR at/resampled to R Hz", for the report.
  std::string Describe(const std::string& dir, int sample_rate) const;
  std::vector<std::string> Notes(int sample_rate) const;
};

// ceil(frames · to_rate / from_rate). REQUIRES: frames ≥ 0, both rates positive.
int64_t ResampledLength(int64_t frames, int from_rate, int to_rate);

// Errors: an unreadable folder, a file libsndfile cannot read (named), no non-empty audio, or sample_rate < 1.
absl::StatusOr<AudioLengths> LengthsFromAudioFolder(const std::string& dir, int sample_rate);

}  // namespace sluice::advisor
