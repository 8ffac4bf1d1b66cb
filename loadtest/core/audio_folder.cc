#include "loadtest/core/audio_folder.h"

#include <samplerate.h>
#include <sndfile.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice::loadtest {

namespace {

// Text files a test set keeps beside its recordings (references, manifests, notes): never audio. Any other file
// libsndfile cannot read is an error, so a mistyped or damaged recording is not silently left out.
bool IsTextFile(const std::filesystem::path& path) {
  const std::string extension = absl::AsciiStrToLower(path.extension().string());
  for (const char* text : {".txt", ".tsv", ".csv", ".json", ".jsonl", ".md", ".yaml", ".yml"}) {
    if (extension == text) return true;
  }
  return false;
}

// The folder's regular files, sorted, without dot files and text files (references, manifests).
absl::StatusOr<std::vector<std::filesystem::path>> ListFiles(const std::string& dir) {
  std::error_code error;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (entry.is_regular_file() && entry.path().filename().string().rfind('.', 0) != 0 &&
        !IsTextFile(entry.path())) {
      files.push_back(entry.path());
    }
  }
  if (error) return absl::NotFoundError(absl::StrCat("audio folder '", dir, "': ", error.message()));
  std::sort(files.begin(), files.end());
  return files;
}

// The text of `<stem>.txt` beside the recording, whitespace-trimmed; none when there is no such file.
absl::StatusOr<std::optional<std::string>> ReadReference(const std::filesystem::path& audio) {
  std::filesystem::path text = audio;
  text.replace_extension(".txt");
  std::error_code error;
  if (!std::filesystem::is_regular_file(text, error)) return std::nullopt;
  std::ifstream in(text, std::ios::binary);
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!in.good() && !in.eof()) return absl::DataLossError(absl::StrCat(text.string(), ": cannot be read"));
  return std::string(absl::StripAsciiWhitespace(content));
}

absl::Status NotAudio(const std::filesystem::path& path) {
  return absl::InvalidArgumentError(absl::StrCat(path.string(), ": not audio libsndfile reads (",
                                                 sf_strerror(nullptr), ")"));
}

// `samples` at `from_hz` as `to_hz`, in one call (a whole clip is in memory anyway).
absl::StatusOr<std::vector<float>> Resample(const std::filesystem::path& path, const std::vector<float>& samples,
                                            int from_hz, int to_hz) {
  const double ratio = static_cast<double>(to_hz) / from_hz;
  if (from_hz <= 0 || !src_is_valid_ratio(ratio)) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), ": ", from_hz, " Hz cannot be resampled to ", to_hz,
                                                   " Hz (libsamplerate converts ratios of 1/256 to 256)"));
  }
  std::vector<float> out(static_cast<size_t>(static_cast<double>(samples.size()) * ratio) + 16);
  SRC_DATA data{};
  data.data_in = samples.data();
  data.input_frames = static_cast<long>(samples.size());
  data.data_out = out.data();
  data.output_frames = static_cast<long>(out.size());
  data.src_ratio = ratio;
  if (const int error = src_simple(&data, SRC_SINC_MEDIUM_QUALITY, /*channels=*/1); error != 0) {
    return absl::InternalError(absl::StrCat(path.string(), ": libsamplerate: ", src_strerror(error)));
  }
  out.resize(static_cast<size_t>(data.output_frames_gen));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<AudioFileInfo>> ProbeAudioFolder(const std::string& dir) {
  absl::StatusOr<std::vector<std::filesystem::path>> files = ListFiles(dir);
  if (!files.ok()) return files.status();
  std::vector<AudioFileInfo> infos;
  for (const std::filesystem::path& path : *files) {
    SF_INFO info{};
    SNDFILE* file = sf_open(path.c_str(), SFM_READ, &info);
    if (file == nullptr) return NotAudio(path);
    sf_close(file);
    infos.push_back({path.filename().string(), static_cast<int64_t>(info.frames), info.samplerate, info.channels});
  }
  if (infos.empty()) return absl::NotFoundError(absl::StrCat("audio folder '", dir, "' holds no audio"));
  return infos;
}

absl::StatusOr<AudioFolder> LoadAudioFolder(const std::string& dir, int sample_rate, int64_t max_length) {
  absl::StatusOr<std::vector<std::filesystem::path>> files = ListFiles(dir);
  if (!files.ok()) return files.status();
  AudioFolder folder;
  for (const std::filesystem::path& path : *files) {
    SF_INFO info{};
    SNDFILE* file = sf_open(path.c_str(), SFM_READ, &info);
    if (file == nullptr) return NotAudio(path);
    std::vector<float> interleaved(static_cast<size_t>(info.frames) * info.channels);
    const sf_count_t frames = sf_readf_float(file, interleaved.data(), info.frames);
    sf_close(file);
    AudioClip clip;
    clip.name = path.filename().string();
    clip.samples.resize(static_cast<size_t>(frames));
    for (sf_count_t f = 0; f < frames; ++f) {
      float sum = 0;
      for (int c = 0; c < info.channels; ++c) sum += interleaved[f * info.channels + c];
      clip.samples[f] = sum / info.channels;
    }
    if (clip.samples.empty()) continue;
    if (info.samplerate != sample_rate) {  // e.g. espeak-ng's 22.05 kHz: what the server would do with it
      absl::StatusOr<std::vector<float>> resampled = Resample(path, clip.samples, info.samplerate, sample_rate);
      if (!resampled.ok()) return resampled.status();
      clip.samples = *std::move(resampled);
      ++folder.resampled;
      if (clip.samples.empty()) continue;
    }
    absl::StatusOr<std::optional<std::string>> reference = ReadReference(path);
    if (!reference.ok()) return reference.status();
    clip.reference = *std::move(reference);
    if (static_cast<int64_t>(clip.samples.size()) > max_length) {
      clip.samples.resize(max_length);
      ++folder.truncated;
    }
    folder.clips.push_back(std::move(clip));
  }
  if (folder.clips.empty()) return absl::NotFoundError(absl::StrCat("audio folder '", dir, "' holds no audio"));
  return folder;
}

}  // namespace sluice::loadtest
