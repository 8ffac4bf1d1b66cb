#include "loadtest/advisor/audio_lengths.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "loadtest/core/audio_folder.h"

namespace sluice::advisor {

int64_t ResampledLength(int64_t frames, int from_rate, int to_rate) {
  if (from_rate == to_rate) return frames;
  // frames · to_rate stays far below 2^63 for any recording (a day at 192 kHz is 1.7e10 frames).
  return (frames * to_rate + from_rate - 1) / from_rate;
}

std::string AudioLengths::Describe(const std::string& dir, int sample_rate) const {
  return absl::StrCat(lengths.size(), " recordings in ", dir, ", in samples at ", sample_rate, " Hz");
}

std::vector<std::string> AudioLengths::Notes(int sample_rate) const {
  std::vector<std::string> notes;
  if (resampled > 0) {
    notes.push_back(absl::StrCat(resampled, " recordings at ", absl::StrJoin(other_rates, ", "),
                                 " Hz count as their length resampled to ", sample_rate, " Hz (rounded up)"));
  }
  if (empty > 0) notes.push_back(absl::StrCat(empty, " empty recordings were skipped"));
  return notes;
}

absl::StatusOr<AudioLengths> LengthsFromAudioFolder(const std::string& dir, int sample_rate) {
  if (sample_rate < 1) return absl::InvalidArgumentError(absl::StrCat("sample rate ", sample_rate, " is not positive"));
  absl::StatusOr<std::vector<loadtest::AudioFileInfo>> files = loadtest::ProbeAudioFolder(dir);
  if (!files.ok()) return files.status();
  AudioLengths out;
  std::set<int> other_rates;
  for (const loadtest::AudioFileInfo& f : *files) {
    if (f.frames <= 0) {
      ++out.empty;
      continue;
    }
    if (f.sample_rate < 1) {
      return absl::InvalidArgumentError(absl::StrCat(dir, "/", f.name, ": sample rate ", f.sample_rate));
    }
    if (f.sample_rate != sample_rate) {
      ++out.resampled;
      other_rates.insert(f.sample_rate);
    }
    out.lengths.push_back(ResampledLength(f.frames, f.sample_rate, sample_rate));
  }
  if (out.lengths.empty()) {
    return absl::NotFoundError(absl::StrCat("audio folder '", dir, "': every one of its ", out.empty,
                                            " recordings is empty"));
  }
  out.other_rates.assign(other_rates.begin(), other_rates.end());
  return out;
}

}  // namespace sluice::advisor
