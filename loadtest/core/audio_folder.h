// Speech inputs from real recordings (--audio-dir, for every API that sends audio: KServe tensors, Riva calls):
// every audio file libsndfile reads (WAV, FLAC, OGG, ...) in a folder (not its subfolders), as mono float PCM at
// the model's sample rate (several channels are averaged; another sample rate is resampled with libsamplerate's
// SRC_SINC_MEDIUM_QUALITY, the converter sluice-server uses, and counted). Clips longer than the model's largest
// bucket (after resampling) are cut to it, and counted. A text file `<name>.txt` beside a recording `<name>.wav`
// (or .flac, ...) holds its reference transcript (for WER); text files (.txt, .tsv, .csv, .json, .jsonl, .md,
// .yaml, .yml: references, manifests, notes) are never taken for audio.
// ProbeAudioFolder reads only the files' headers (sluice-advisor's lengths).
// Thread-safety: plain values and a pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::loadtest {

struct AudioClip {
  std::string name;  // file name within the folder
  std::vector<float> samples;
  std::optional<std::string> reference;  // the transcript in <stem>.txt, when there is one
};

struct AudioFolder {
  std::vector<AudioClip> clips;  // sorted by file name
  int truncated = 0;             // clips cut to max_length
  int resampled = 0;             // clips recorded at another rate than the model's
};

// One audio file's header: its length and format, without reading the samples.
struct AudioFileInfo {
  std::string name;  // file name within the folder
  int64_t frames = 0;
  int sample_rate = 0;
  int channels = 0;
};

// Every audio file in the folder (the files LoadAudioFolder reads, empty ones included), sorted by name, at
// whatever sample rate. Fails on an unreadable folder, a file libsndfile cannot read, or a folder with no files.
absl::StatusOr<std::vector<AudioFileInfo>> ProbeAudioFolder(const std::string& dir);

// Fails on an unreadable folder, a file libsndfile cannot read, a rate libsamplerate cannot convert from, or a
// folder with no audio. Files whose names start with '.' are skipped.
absl::StatusOr<AudioFolder> LoadAudioFolder(const std::string& dir, int sample_rate, int64_t max_length);

}  // namespace sluice::loadtest
