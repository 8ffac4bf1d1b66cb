#include "loadtest/speech/speech_audio.h"

#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {
namespace {

// A file in memory for libsndfile's virtual I/O (it seeks back to fill in the WAV header's sizes on close).
struct MemoryFile {
  std::string bytes;
  sf_count_t position = 0;
};

sf_count_t Length(void* user) { return static_cast<sf_count_t>(static_cast<MemoryFile*>(user)->bytes.size()); }

sf_count_t Seek(sf_count_t offset, int whence, void* user) {
  auto* file = static_cast<MemoryFile*>(user);
  const sf_count_t base = whence == SEEK_CUR ? file->position
                          : whence == SEEK_END ? static_cast<sf_count_t>(file->bytes.size())
                                               : 0;
  file->position = std::max<sf_count_t>(0, base + offset);
  return file->position;
}

sf_count_t Read(void* out, sf_count_t count, void* user) {
  auto* file = static_cast<MemoryFile*>(user);
  const sf_count_t available = std::max<sf_count_t>(0, static_cast<sf_count_t>(file->bytes.size()) - file->position);
  const sf_count_t n = std::min(count, available);
  std::memcpy(out, file->bytes.data() + file->position, static_cast<size_t>(n));
  file->position += n;
  return n;
}

sf_count_t Write(const void* in, sf_count_t count, void* user) {
  auto* file = static_cast<MemoryFile*>(user);
  const size_t end = static_cast<size_t>(file->position + count);
  if (file->bytes.size() < end) file->bytes.resize(end);
  std::memcpy(file->bytes.data() + file->position, in, static_cast<size_t>(count));
  file->position += count;
  return count;
}

sf_count_t Tell(void* user) { return static_cast<MemoryFile*>(user)->position; }

}  // namespace

std::vector<int16_t> ToPcm16(std::span<const float> samples) {
  std::vector<int16_t> out(samples.size());
  for (size_t i = 0; i < samples.size(); ++i) {
    const double scaled = std::nearbyint(static_cast<double>(samples[i]) * 32768.0);
    out[i] = static_cast<int16_t>(std::clamp(std::isnan(scaled) ? 0.0 : scaled, -32768.0, 32767.0));
  }
  return out;
}

absl::StatusOr<std::string> EncodeWav(std::span<const float> samples, int sample_rate) {
  const std::vector<int16_t> pcm = ToPcm16(samples);
  SF_VIRTUAL_IO io{Length, Seek, Read, Write, Tell};
  MemoryFile file;
  file.bytes.reserve(pcm.size() * 2 + 64);
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* out = sf_open_virtual(&io, SFM_WRITE, &info, &file);
  if (out == nullptr) {
    return absl::InternalError(absl::StrCat("libsndfile cannot write a 16-bit WAV file at ", sample_rate, " Hz: ",
                                            sf_strerror(nullptr)));
  }
  const sf_count_t written = sf_write_short(out, pcm.data(), static_cast<sf_count_t>(pcm.size()));
  sf_close(out);
  if (written != static_cast<sf_count_t>(pcm.size())) {
    return absl::InternalError(absl::StrCat("libsndfile wrote ", written, " of ", pcm.size(), " samples"));
  }
  return std::move(file.bytes);
}

std::string EncodePcm16(std::span<const float> samples) {
  const std::vector<int16_t> pcm = ToPcm16(samples);
  std::string bytes(pcm.size() * 2, '\0');
  for (size_t i = 0; i < pcm.size(); ++i) {  // little-endian whatever the host's order
    const auto v = static_cast<uint16_t>(pcm[i]);
    bytes[2 * i] = static_cast<char>(v & 0xff);
    bytes[2 * i + 1] = static_cast<char>(v >> 8);
  }
  return bytes;
}

ChunkPlan PlanChunks(int64_t samples, int sample_rate, double chunk_ms) {
  ChunkPlan plan;
  plan.samples = samples;
  plan.sample_rate = sample_rate;
  plan.chunk_samples = std::max<int64_t>(1, std::llround(sample_rate * chunk_ms / 1000.0));
  return plan;
}

}  // namespace sluice::loadtest
