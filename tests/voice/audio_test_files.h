// Test audio made in memory: sines and known int16 values, written as real WAV/FLAC/OGG/G.711 bytes by
// libsndfile's virtual I/O (write mode), plus signal checks (zero crossings, distance to a sine).
// Thread-safety: pure helpers.
#pragma once

#include <gtest/gtest.h>
#include <sndfile.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numbers>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace sluice::voice::testing {

// A growable, seekable in-memory file: libsndfile's writers seek back to patch their headers.
struct MemoryOut {
  std::string data;
  sf_count_t pos = 0;

  static sf_count_t Length(void* self) { return static_cast<MemoryOut*>(self)->data.size(); }
  static sf_count_t Seek(sf_count_t offset, int whence, void* self) {
    auto* m = static_cast<MemoryOut*>(self);
    m->pos = (whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->data.size() : 0) + offset;
    return m->pos;
  }
  static sf_count_t Read(void* ptr, sf_count_t count, void* self) {
    auto* m = static_cast<MemoryOut*>(self);
    const sf_count_t n = std::clamp<sf_count_t>(m->data.size() - m->pos, 0, count);
    std::memcpy(ptr, m->data.data() + m->pos, n);
    m->pos += n;
    return n;
  }
  static sf_count_t Write(const void* ptr, sf_count_t count, void* self) {
    auto* m = static_cast<MemoryOut*>(self);
    if (m->data.size() < static_cast<size_t>(m->pos + count)) m->data.resize(m->pos + count);
    std::memcpy(m->data.data() + m->pos, ptr, count);
    m->pos += count;
    return count;
  }
  static sf_count_t Tell(void* self) { return static_cast<MemoryOut*>(self)->pos; }
};

// Writes interleaved samples (int16 or float) as a file of libsndfile `format` (e.g. SF_FORMAT_WAV |
// SF_FORMAT_PCM_16). Fails the test and returns "" if libsndfile refuses.
template <typename Sample>
std::string Encode(const std::vector<Sample>& interleaved, int rate, int channels, int format) {
  MemoryOut out;
  SF_VIRTUAL_IO io = {MemoryOut::Length, MemoryOut::Seek, MemoryOut::Read, MemoryOut::Write, MemoryOut::Tell};
  SF_INFO info = {};
  info.samplerate = rate;
  info.channels = channels;
  info.format = format;
  SNDFILE* sf = sf_open_virtual(&io, SFM_WRITE, &info, &out);
  if (sf == nullptr) {
    ADD_FAILURE() << "libsndfile cannot write format 0x" << std::hex << format << ": " << sf_strerror(nullptr);
    return "";
  }
  const sf_count_t frames = interleaved.size() / channels;
  sf_count_t written;
  if constexpr (std::is_same_v<Sample, float>) {
    written = sf_writef_float(sf, interleaved.data(), frames);
  } else {
    written = sf_writef_short(sf, interleaved.data(), frames);
  }
  EXPECT_EQ(written, frames) << sf_strerror(sf);
  sf_close(sf);
  return out.data;
}

// `seconds` of amplitude * sin(2 pi hz t + 0.3) at `rate` (the phase keeps samples off exact zeros).
inline std::vector<float> Sine(double hz, int rate, double seconds, double amplitude = 0.5) {
  std::vector<float> x(static_cast<size_t>(std::lround(seconds * rate)));
  for (size_t i = 0; i < x.size(); ++i) x[i] = amplitude * std::sin(2 * std::numbers::pi * hz * i / rate + 0.3);
  return x;
}

inline std::vector<int16_t> ToPcm16(const std::vector<float>& x) {
  std::vector<int16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<int16_t>(std::lround(x[i] * 32767));
  return out;
}

// Raw little-endian int16 bytes, as Riva's LINEAR_PCM.
inline std::string RawPcm16(const std::vector<int16_t>& x) {
  std::string out;
  for (int16_t v : x) {
    out.push_back(static_cast<char>(v & 0xFF));
    out.push_back(static_cast<char>((static_cast<uint16_t>(v) >> 8) & 0xFF));
  }
  return out;
}

// Sign changes in x[begin, end).
inline int ZeroCrossings(const std::vector<float>& x, size_t begin, size_t end) {
  int n = 0;
  for (size_t i = begin + 1; i < end; ++i) n += (x[i - 1] < 0) != (x[i] < 0);
  return n;
}

// Largest |x[i] - amplitude * sin(2 pi hz i / rate + 0.3)| over i in [begin, end).
inline double MaxDistanceToSine(const std::vector<float>& x, double hz, int rate, size_t begin, size_t end,
                                double amplitude = 0.5) {
  double worst = 0;
  for (size_t i = begin; i < end && i < x.size(); ++i) {
    worst = std::max(worst, std::abs(x[i] - amplitude * std::sin(2 * std::numbers::pi * hz * i / rate + 0.3)));
  }
  return worst;
}

inline double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) worst = std::max<double>(worst, std::abs(a[i] - b[i]));
  return worst;
}

}  // namespace sluice::voice::testing
