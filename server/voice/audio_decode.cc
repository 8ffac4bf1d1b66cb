#include "server/voice/audio_decode.h"

#include <ogg/ogg.h>
#include <sndfile.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/voice/audio_decode_internal.h"

namespace sluice::voice {
namespace {

// libsndfile reads from memory through its virtual I/O: the request's bytes are never copied.
struct MemoryFile {
  std::string_view bytes;
  sf_count_t pos = 0;
};

sf_count_t MemoryLength(void* user) { return static_cast<MemoryFile*>(user)->bytes.size(); }

sf_count_t MemorySeek(sf_count_t offset, int whence, void* user) {
  auto* file = static_cast<MemoryFile*>(user);
  const sf_count_t base = whence == SEEK_CUR ? file->pos : whence == SEEK_END ? file->bytes.size() : 0;
  if (base + offset < 0) return -1;
  file->pos = base + offset;  // past the end is allowed, as for a file; reads there return nothing
  return file->pos;
}

sf_count_t MemoryRead(void* ptr, sf_count_t count, void* user) {
  auto* file = static_cast<MemoryFile*>(user);
  const sf_count_t size = file->bytes.size();
  const sf_count_t n = std::clamp<sf_count_t>(size - file->pos, 0, std::max<sf_count_t>(count, 0));
  if (n > 0) std::memcpy(ptr, file->bytes.data() + file->pos, n);
  file->pos += n;
  return n;
}

sf_count_t MemoryWrite(const void*, sf_count_t, void*) { return 0; }  // read-only
sf_count_t MemoryTell(void* user) { return static_cast<MemoryFile*>(user)->pos; }

struct SndfileCloser {
  void operator()(SNDFILE* file) const { sf_close(file); }
};
using SndfilePtr = std::unique_ptr<SNDFILE, SndfileCloser>;

// Opens `file` for reading; `info` must be zeroed for containers and filled in for SF_FORMAT_RAW.
absl::StatusOr<SndfilePtr> OpenMemory(MemoryFile* file, SF_INFO* info, absl::string_view format) {
  SF_VIRTUAL_IO io = {MemoryLength, MemorySeek, MemoryRead, MemoryWrite, MemoryTell};
  SNDFILE* sf = sf_open_virtual(&io, SFM_READ, info, file);
  // sf_strerror(nullptr) reads libsndfile's last-open error, a process global: a concurrent failing open may
  // swap the message, never the outcome.
  if (sf == nullptr) {
    const std::string why = sf_strerror(nullptr);
    // What libsndfile says of a header with no usable rate or channel count where HeaderRateAndChannels cannot
    // look (AIFF, a WAV whose fmt chunk lies past the bytes checked).
    if (why.find("SF_INFO struct incomplete") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("the ", format, " header declares no valid sample rate or ",
                                                     "channel count (libsndfile: ", why, ")"));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("cannot decode the ", format, " audio (corrupt or truncated?): ", why));
  }
  return SndfilePtr(sf);
}

// Reads every frame of `sf` as mono (mean of channels). Stops with InvalidArgument past max_frames, so a
// file whose header hides its length is still refused without decoding it all. Float containers (IEEE float WAV,
// AIFF, AU) may hold NaN, infinities or huge values: each sample is clamped to [-1, 1], NaN to 0, before channels
// are mixed, so one such value can neither overflow the mix nor spread NaN through the resampler's output.
absl::StatusOr<std::vector<float>> ReadMono(SNDFILE* sf, const SF_INFO& info, int64_t max_frames,
                                            double max_seconds, absl::string_view format) {
  constexpr sf_count_t kBlockFrames = 4096;
  std::vector<float> block(kBlockFrames * info.channels);
  std::vector<float> mono;
  if (info.frames > 0 && info.frames <= max_frames) mono.reserve(info.frames);
  while (true) {
    const sf_count_t got = sf_readf_float(sf, block.data(), kBlockFrames);
    if (got <= 0) break;
    for (sf_count_t f = 0; f < got; ++f) {
      float sum = 0;
      for (int c = 0; c < info.channels; ++c) {
        const float x = block[f * info.channels + c];
        sum += std::isnan(x) ? 0.0f : std::clamp(x, -1.0f, 1.0f);
      }
      mono.push_back(sum / info.channels);
    }
    if (static_cast<int64_t>(mono.size()) > max_frames) {
      return absl::InvalidArgumentError(absl::StrCat("the ", format, " audio is longer than the limit of ",
                                                     max_seconds, " s (max_audio_seconds)"));
    }
  }
  if (sf_error(sf) != SF_ERR_NO_ERROR) {
    return absl::InvalidArgumentError(
        absl::StrCat("corrupt or truncated ", format, " audio after ", mono.size(), " frames: ", sf_strerror(sf)));
  }
  // A header that promises more frames than the body holds: the file was cut off (FLAC, OGG).
  if (info.frames > 0 && info.frames < SF_COUNT_MAX && static_cast<int64_t>(mono.size()) < info.frames) {
    return absl::InvalidArgumentError(absl::StrCat("truncated ", format, " audio: the header declares ",
                                                   info.frames, " frames, only ", mono.size(), " decode"));
  }
  return mono;
}

// The container a file's first bytes announce, or nullopt for raw audio.
std::optional<absl::string_view> SniffContainer(std::string_view b) {
  auto at = [&](size_t pos, std::string_view magic) { return b.size() >= pos + 4 && b.substr(pos, 4) == magic; };
  if ((at(0, "RIFF") || at(0, "RIFX") || at(0, "RF64")) && at(8, "WAVE")) return "wav";
  if (at(0, "fLaC")) return "flac";
  if (at(0, "OggS")) return "ogg";
  if (at(0, "FORM") && (at(8, "AIFF") || at(8, "AIFC"))) return "aiff";
  if (at(0, ".snd")) return "au";
  return std::nullopt;
}

int64_t MaxFrames(double max_seconds, int rate_hz) {
  const double frames = max_seconds * rate_hz;
  return frames >= static_cast<double>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                             : static_cast<int64_t>(frames);
}

// libsndfile reads a WAV whose data was cut off as a shorter file; the RIFF size field says how long it was.
// 0 and 0xFFFFFFFF mean "unknown" (written while streaming) and pass.
absl::Status CheckRiffSize(std::string_view bytes) {
  if (bytes.size() < 8 || bytes.substr(0, 4) != "RIFF") return absl::OkStatus();
  uint32_t declared = 0;
  for (int i = 3; i >= 0; --i) declared = (declared << 8) | static_cast<uint8_t>(bytes[4 + i]);
  if (declared == 0 || declared == 0xFFFFFFFFu || uint64_t{declared} + 8 <= bytes.size()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("truncated wav audio: its RIFF header declares ",
                                                 uint64_t{declared} + 8, " bytes, only ", bytes.size(), " arrived"));
}

// OGG is accepted with Opus inside only (what Riva's OGGOPUS names). Debian's libsndfile 1.2.0 leaks libvorbis's
// setup (~6 KB) whenever it refuses malformed Vorbis headers (found by fuzz_audio_decode; upstream's ogg_vorbis.c
// has the same code), which would let a client grow the server's memory at will: Vorbis is refused before
// libsndfile sees it. libsndfile names the codec from the first page libogg accepts, and libogg skips whatever
// does not form a page (a bad checksum, a cut-off page) to the next "OggS": looking at byte 0 is not enough (the
// fuzzer's second find). So libogg itself must accept a page at byte 0, the stream's first (BOS, not a
// continuation), and its first packet, which then starts the body, must be "OpusHead".
absl::Status CheckOggIsOpus(std::string_view bytes) {
  constexpr size_t kLargestOggPage = 27 + 255 + 255 * 255;
  const size_t scanned = std::min(bytes.size(), kLargestOggPage);
  ogg_sync_state sync;
  ogg_sync_init(&sync);
  char* buffer = ogg_sync_buffer(&sync, static_cast<long>(scanned));
  bool opus = false;
  if (buffer != nullptr) {
    std::memcpy(buffer, bytes.data(), scanned);
    ogg_sync_wrote(&sync, static_cast<long>(scanned));
    ogg_page page;
    // > 0: a whole page with a valid checksum starts at byte 0 (< 0 would mean bytes skipped, 0 a cut-off page).
    opus = ogg_sync_pageseek(&sync, &page) > 0 && ogg_page_bos(&page) && !ogg_page_continued(&page) &&
           page.body_len >= 8 && std::memcmp(page.body, "OpusHead", 8) == 0;
  }
  ogg_sync_clear(&sync);
  if (opus) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "ogg audio must carry Opus (OGGOPUS) and start with an intact Opus header page; other codecs in OGG (Vorbis, "
      "FLAC) are not accepted: send WAV, FLAC or OGG Opus");
}

uint32_t Le(std::string_view b, size_t pos, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[pos + i]);
  return v;
}
uint32_t Be(std::string_view b, size_t pos, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(b[pos + i]);
  return v;
}

// The rate and channel count a WAV, FLAC or AU header declares, where they sit at fixed places; nullopt when the
// bytes end before them (libsndfile then says what is wrong). libsndfile refuses a rate of 0 with "Internal error:
// SF_INFO struct incomplete": these let the refusal name the field.
std::optional<std::pair<int64_t, int64_t>> HeaderRateAndChannels(std::string_view b, absl::string_view format) {
  if (format == "wav" && b.substr(0, 4) == "RIFF") {
    for (size_t pos = 12; pos + 8 <= b.size() && pos < (size_t{1} << 20);) {
      const uint32_t size = Le(b, pos + 4, 4);
      if (b.substr(pos, 4) == "fmt ") {
        if (size < 16 || pos + 24 > b.size()) return std::nullopt;
        return std::pair<int64_t, int64_t>{Le(b, pos + 12, 4), Le(b, pos + 10, 2)};
      }
      pos += 8 + uint64_t{size} + (size & 1);
    }
  } else if (format == "flac" && b.size() >= 21 && (static_cast<uint8_t>(b[4]) & 0x7F) == 0) {
    // STREAMINFO, the first metadata block: 20 bits of rate, then 3 bits of channels - 1.
    return std::pair<int64_t, int64_t>{Be(b, 18, 3) >> 4, ((Be(b, 20, 1) >> 1) & 7) + 1};
  } else if (format == "au" && b.size() >= 24) {
    return std::pair<int64_t, int64_t>{Be(b, 16, 4), Be(b, 20, 4)};
  }
  return std::nullopt;
}

absl::Status CheckHeaderRateAndChannels(std::string_view bytes, absl::string_view format) {
  std::optional<std::pair<int64_t, int64_t>> declared = HeaderRateAndChannels(bytes, format);
  if (!declared) return absl::OkStatus();
  const std::string whose = absl::StrCat("the ", format, " header's");
  const auto clamp = [](int64_t v) { return static_cast<int>(std::min<int64_t>(v, INT32_MAX)); };
  if (absl::Status s = ValidateRate(clamp(declared->first), absl::StrCat(whose, " sample rate")); !s.ok()) return s;
  return ValidateChannels(clamp(declared->second), absl::StrCat(whose, " channel count"));
}

// An opened container and what its header says, checked against the limits (nothing read yet).
struct OpenedContainer {
  SndfilePtr sf;
  SF_INFO info = {};
};

absl::StatusOr<OpenedContainer> OpenContainer(MemoryFile* file, absl::string_view format, double max_seconds) {
  const std::string_view bytes = file->bytes;
  if (format == "wav") {
    if (absl::Status s = CheckRiffSize(bytes); !s.ok()) return s;
  }
  if (format == "ogg") {
    if (absl::Status s = CheckOggIsOpus(bytes); !s.ok()) return s;
  }
  if (absl::Status s = CheckHeaderRateAndChannels(bytes, format); !s.ok()) return s;
  OpenedContainer opened;
  absl::StatusOr<SndfilePtr> sf = OpenMemory(file, &opened.info, format);
  if (!sf.ok()) return sf.status();
  opened.sf = *std::move(sf);
  const SF_INFO& info = opened.info;
  const std::string whose = absl::StrCat("the ", format, " header's");
  if (absl::Status s = ValidateChannels(info.channels, absl::StrCat(whose, " channel count")); !s.ok()) return s;
  if (absl::Status s = ValidateRate(info.samplerate, absl::StrCat(whose, " sample rate")); !s.ok()) return s;
  if (info.frames > 0 && info.frames < SF_COUNT_MAX) {
    const double seconds = static_cast<double>(info.frames) / info.samplerate;
    if (absl::Status s = CheckDuration(seconds, max_seconds, absl::StrCat("the ", format, " audio")); !s.ok()) {
      return s;
    }
  }
  return opened;
}

absl::StatusOr<DecodedAudio> DecodeContainer(std::string_view bytes, absl::string_view format, double max_seconds) {
  MemoryFile file{bytes};
  absl::StatusOr<OpenedContainer> opened = OpenContainer(&file, format, max_seconds);
  if (!opened.ok()) return opened.status();
  const SF_INFO& info = opened->info;
  absl::StatusOr<std::vector<float>> mono =
      ReadMono(opened->sf.get(), info, MaxFrames(max_seconds, info.samplerate), max_seconds, format);
  if (!mono.ok()) return mono.status();
  DecodedAudio audio;
  audio.samples = *std::move(mono);
  audio.source_rate_hz = info.samplerate;
  audio.source_channels = info.channels;
  audio.format = std::string(format);
  return audio;
}

// The checks on raw bytes in the declared encoding, and the extent they hold.
absl::StatusOr<AudioExtent> ProbeRaw(std::string_view bytes, const DeclaredAudio& declared, double max_seconds) {
  absl::string_view format;
  int sample_bytes = 1;
  switch (declared.encoding) {
    case AudioEncoding::kLinearPcm: format = "raw-pcm16", sample_bytes = 2; break;
    case AudioEncoding::kMulaw: format = "raw-mulaw"; break;
    case AudioEncoding::kAlaw: format = "raw-alaw"; break;
    case AudioEncoding::kUnspecified:
      return absl::InvalidArgumentError(
          "audio encoding is unspecified (ENCODING_UNSPECIFIED) and the bytes are not a WAV, FLAC or OGG file; "
          "declare LINEAR_PCM, MULAW or ALAW for raw audio");
    case AudioEncoding::kFlac:
      return absl::InvalidArgumentError("encoding FLAC declared but the bytes are not a FLAC file (no 'fLaC')");
    case AudioEncoding::kOggOpus:
      return absl::InvalidArgumentError("encoding OGGOPUS declared but the bytes are not an OGG file (no 'OggS')");
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported audio encoding ", static_cast<int>(declared.encoding)));
  }
  if (absl::Status s = ValidateRate(declared.sample_rate_hz, "raw audio's sample_rate_hertz"); !s.ok()) return s;
  if (absl::Status s = ValidateChannels(declared.channels, "audio_channel_count"); !s.ok()) return s;
  const size_t frame_bytes = static_cast<size_t>(sample_bytes) * declared.channels;
  if (bytes.size() % frame_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(format, " byte count ", bytes.size(), " is not a multiple of ",
                                                   frame_bytes, " (", sample_bytes, " bytes x ", declared.channels,
                                                   " channels): truncated sample or wrong channel count"));
  }
  const size_t frames = bytes.size() / frame_bytes;
  const double seconds = static_cast<double>(frames) / declared.sample_rate_hz;
  if (absl::Status s = CheckDuration(seconds, max_seconds, absl::StrCat("the ", format, " audio")); !s.ok()) return s;
  return AudioExtent{.format = std::string(format),
                     .source_rate_hz = declared.sample_rate_hz,
                     .source_channels = declared.channels,
                     .frames = static_cast<int64_t>(frames)};
}

absl::StatusOr<DecodedAudio> DecodeRaw(std::string_view bytes, const DeclaredAudio& declared, double max_seconds) {
  absl::StatusOr<AudioExtent> extent = ProbeRaw(bytes, declared, max_seconds);
  if (!extent.ok()) return extent.status();
  const size_t frames = static_cast<size_t>(extent->frames);
  DecodedAudio audio;
  audio.source_rate_hz = declared.sample_rate_hz;
  audio.source_channels = declared.channels;
  audio.format = extent->format;
  if (declared.encoding == AudioEncoding::kLinearPcm) {
    audio.samples.reserve(frames);
    MixPcm16ToMono(bytes.data(), frames, declared.channels, &audio.samples);
    return audio;
  }
  MemoryFile file{bytes};
  SF_INFO info = {};
  info.samplerate = declared.sample_rate_hz;
  info.channels = declared.channels;
  info.format = SF_FORMAT_RAW | (declared.encoding == AudioEncoding::kMulaw ? SF_FORMAT_ULAW : SF_FORMAT_ALAW);
  absl::StatusOr<SndfilePtr> sf = OpenMemory(&file, &info, extent->format);
  if (!sf.ok()) return sf.status();
  absl::StatusOr<std::vector<float>> mono = ReadMono(sf->get(), info, frames, max_seconds, extent->format);
  if (!mono.ok()) return mono.status();
  audio.samples = *std::move(mono);
  return audio;
}

absl::StatusOr<std::array<float, 256>> BuildG711Table(AudioEncoding encoding) {
  std::string all(256, '\0');
  for (int i = 0; i < 256; ++i) all[i] = static_cast<char>(i);
  MemoryFile file{all};
  SF_INFO info = {};
  info.samplerate = 8000;
  info.channels = 1;
  info.format = SF_FORMAT_RAW | (encoding == AudioEncoding::kMulaw ? SF_FORMAT_ULAW : SF_FORMAT_ALAW);
  absl::StatusOr<SndfilePtr> sf = OpenMemory(&file, &info, "G.711");
  if (!sf.ok()) return sf.status();
  std::array<float, 256> table;
  if (sf_read_float(sf->get(), table.data(), 256) != 256) {
    return absl::InternalError(
        absl::StrCat("libsndfile decoded fewer than 256 G.711 bytes: ", sf_strerror(sf->get())));
  }
  return table;
}

}  // namespace

double DecodedAudio::seconds() const {
  return target_rate_hz > 0 ? static_cast<double>(samples.size()) / target_rate_hz : 0.0;
}

absl::StatusOr<const float*> G711Table(AudioEncoding encoding) {
  // Built once (thread-safe statics) and never freed.
  static const auto* const kMulaw = new absl::StatusOr<std::array<float, 256>>(BuildG711Table(AudioEncoding::kMulaw));
  static const auto* const kAlaw = new absl::StatusOr<std::array<float, 256>>(BuildG711Table(AudioEncoding::kAlaw));
  const auto* table = encoding == AudioEncoding::kMulaw ? kMulaw : kAlaw;
  if (!table->ok()) return table->status();
  return (*table)->data();
}

absl::StatusOr<AudioExtent> ProbeAudio(std::string_view bytes, const DeclaredAudio& declared, double max_seconds) {
  if (!(max_seconds > 0)) return absl::InvalidArgumentError(absl::StrCat("max_seconds ", max_seconds, " is not > 0"));
  if (bytes.empty()) return absl::InvalidArgumentError("empty audio: no bytes");
  const std::optional<absl::string_view> container = SniffContainer(bytes);
  if (!container) return ProbeRaw(bytes, declared, max_seconds);
  MemoryFile file{bytes};
  absl::StatusOr<OpenedContainer> opened = OpenContainer(&file, *container, max_seconds);
  if (!opened.ok()) return opened.status();
  const SF_INFO& info = opened->info;
  return AudioExtent{.format = std::string(*container),
                     .source_rate_hz = info.samplerate,
                     .source_channels = info.channels,
                     .frames = info.frames > 0 && info.frames < SF_COUNT_MAX ? static_cast<int64_t>(info.frames) : -1};
}

int64_t DecodePeakBytes(const AudioExtent& extent, int target_rate_hz, double max_seconds) {
  if (extent.source_rate_hz <= 0 || target_rate_hz <= 0) return 0;
  const double limit = max_seconds * extent.source_rate_hz;
  const double frames = extent.frames >= 0 ? std::min<double>(extent.frames, limit) : limit;
  const double resampled =
      extent.source_rate_hz == target_rate_hz ? 0 : frames * target_rate_hz / extent.source_rate_hz + 1024;
  const double bytes = (frames + resampled) * sizeof(float);
  return bytes >= 9e18 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(bytes);
}

absl::StatusOr<DecodedAudio> DecodeAudio(std::string_view bytes, const DeclaredAudio& declared, int target_rate_hz,
                                         double max_seconds) {
  if (absl::Status s = ValidateRate(target_rate_hz, "the target sample rate"); !s.ok()) return s;
  if (!(max_seconds > 0)) return absl::InvalidArgumentError(absl::StrCat("max_seconds ", max_seconds, " is not > 0"));
  if (bytes.empty()) return absl::InvalidArgumentError("empty audio: no bytes");
  const std::optional<absl::string_view> container = SniffContainer(bytes);
  absl::StatusOr<DecodedAudio> audio =
      container ? DecodeContainer(bytes, *container, max_seconds) : DecodeRaw(bytes, declared, max_seconds);
  if (!audio.ok()) return audio.status();
  if (audio->samples.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("empty audio: the ", audio->format, " input has no samples"));
  }
  audio->target_rate_hz = target_rate_hz;
  if (audio->source_rate_hz != target_rate_hz) {
    absl::StatusOr<std::unique_ptr<Resampler>> resampler = Resampler::Create(audio->source_rate_hz, target_rate_hz);
    if (!resampler.ok()) return resampler.status();
    std::vector<float> resampled;
    if (absl::Status s = (*resampler)->Process(audio->samples, /*end_of_input=*/true, &resampled); !s.ok()) return s;
    // A few samples at a much higher rate may make none at the target rate: that is no audio either (callers such
    // as OfflineRecognition plan no window for it, and would never answer).
    if (resampled.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("empty audio: the ", audio->format, " input's ",
                                                     audio->samples.size(), " sample(s) at ", audio->source_rate_hz,
                                                     " Hz make no sample at ", target_rate_hz, " Hz"));
    }
    audio->samples = std::move(resampled);
  }
  ClampToUnit(audio->samples);
  return audio;
}

}  // namespace sluice::voice
