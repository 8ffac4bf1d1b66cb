// StreamingAudioDecoder: raw PCM16 / mu-law / A-law chunks (optionally behind a WAV header) -> mono floats at
// the target rate, through one libsamplerate state for the whole stream.
#include <algorithm>
#include <climits>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "server/voice/audio_decode.h"
#include "server/voice/audio_decode_internal.h"

namespace sluice::voice {
namespace {

constexpr std::string_view kRiff = "RIFF";
constexpr size_t kRiffHeaderBytes = 12;  // "RIFF" <size> "WAVE"

// WAVE format tags (RFC 2361).
constexpr uint16_t kWavePcm = 1;
constexpr uint16_t kWaveAlaw = 6;
constexpr uint16_t kWaveMulaw = 7;
constexpr uint16_t kWaveExtensible = 0xFFFE;

uint32_t Le16(std::string_view b, size_t pos) {
  return static_cast<unsigned char>(b[pos]) | static_cast<unsigned char>(b[pos + 1]) << 8;
}
uint32_t Le32(std::string_view b, size_t pos) { return Le16(b, pos) | Le16(b, pos + 2) << 16; }

int SampleBytes(AudioEncoding encoding) { return encoding == AudioEncoding::kLinearPcm ? 2 : 1; }

absl::Status ValidateRaw(const DeclaredAudio& audio, absl::string_view whose) {
  if (audio.encoding != AudioEncoding::kLinearPcm && audio.encoding != AudioEncoding::kMulaw &&
      audio.encoding != AudioEncoding::kAlaw) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported encoding ", static_cast<int>(audio.encoding),
                     " for streaming audio: streams take raw LINEAR_PCM (16-bit), MULAW or ALAW"));
  }
  if (absl::Status s = ValidateRate(audio.sample_rate_hz, absl::StrCat(whose, " sample rate")); !s.ok()) return s;
  return ValidateChannels(audio.channels, absl::StrCat(whose, " channel count"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> StreamingAudioDecoder::Create(const DeclaredAudio& declared,
                                                                                     int target_rate_hz,
                                                                                     double max_seconds) {
  if (absl::Status s = ValidateRaw(declared, "the declared"); !s.ok()) return s;
  if (absl::Status s = ValidateRate(target_rate_hz, "the target sample rate"); !s.ok()) return s;
  if (!(max_seconds > 0)) return absl::InvalidArgumentError(absl::StrCat("max_seconds ", max_seconds, " is not > 0"));
  return std::unique_ptr<StreamingAudioDecoder>(new StreamingAudioDecoder(declared, target_rate_hz, max_seconds));
}

StreamingAudioDecoder::StreamingAudioDecoder(const DeclaredAudio& declared, int target_rate_hz, double max_seconds)
    : source_(declared), target_rate_hz_(target_rate_hz), max_seconds_(max_seconds) {}

int64_t StreamingAudioDecoder::FramesIn(size_t bytes) const {
  if (data_bytes_left_ >= 0) bytes = std::min<size_t>(bytes, static_cast<size_t>(data_bytes_left_));
  const size_t frame_bytes = static_cast<size_t>(SampleBytes(source_.encoding)) * source_.channels;
  return static_cast<int64_t>((pending_.size() + bytes) / frame_bytes);
}

absl::StatusOr<int64_t> StreamingAudioDecoder::CheckRoomFor(std::string_view bytes) const {
  if (phase_ == Phase::kFinished || phase_ == Phase::kAfterData) return 0;
  AudioExtent extent;
  extent.source_rate_hz = source_.sample_rate_hz;
  extent.source_channels = source_.channels;
  if (phase_ == Phase::kData || (phase_ == Phase::kSniffing && StaysRaw(bytes))) {
    extent.frames = FramesIn(bytes.size());
    const double seconds = static_cast<double>(input_frames_ + extent.frames) / source_.sample_rate_hz;
    if (absl::Status s = CheckDuration(seconds, max_seconds_, "the stream's audio with this chunk"); !s.ok()) {
      return s;
    }
  } else {
    // A WAV header may still change the format: assume the most frames per byte at the lowest rate (Append
    // checks the limit once the header is known).
    extent.source_rate_hz = kMinAudioRateHz;
    extent.frames = static_cast<int64_t>(bytes.size());
  }
  return DecodePeakBytes(extent, target_rate_hz_, max_seconds_);
}

// Whether Sniff, given pending_ + `bytes`, finds raw audio (see Sniff).
bool StreamingAudioDecoder::StaysRaw(std::string_view bytes) const {
  std::string head = pending_;
  head.append(bytes.substr(0, kRiffHeaderBytes - std::min(kRiffHeaderBytes, head.size())));
  const size_t n = std::min(head.size(), kRiff.size());
  if (head.compare(0, n, kRiff, 0, n) != 0) return true;
  return head.size() >= kRiffHeaderBytes && head.compare(8, 4, "WAVE") != 0;
}

StreamingAudioDecoder::~StreamingAudioDecoder() = default;

absl::Status StreamingAudioDecoder::Append(std::string_view bytes, std::vector<float>* out) {
  switch (phase_) {
    case Phase::kFinished:
      return absl::FailedPreconditionError("audio appended after the stream finished");
    case Phase::kAfterData:
      return absl::OkStatus();  // chunks after the WAV data chunk (LIST, id3) carry no samples
    case Phase::kData:
      return DecodeFrames(bytes, out);
    case Phase::kSniffing:
    case Phase::kWavHeader:
      break;
  }
  pending_.append(bytes);
  if (phase_ == Phase::kSniffing) Sniff();
  if (phase_ == Phase::kWavHeader) {
    if (absl::Status s = ParseWavHeader(); !s.ok()) {
      phase_ = Phase::kFinished;
      return s;
    }
  }
  if (phase_ != Phase::kData) return absl::OkStatus();  // header still incomplete
  if (absl::Status s = StartData(); !s.ok()) return s;
  // pending_ now holds the first data bytes (after any header); decode them as a chunk of their own.
  std::string data = std::move(pending_);
  pending_.clear();
  return DecodeFrames(data, out);
}

// Decides raw vs WAV from the first bytes: a raw stream need not wait once they differ from "RIFF".
void StreamingAudioDecoder::Sniff() {
  const size_t n = std::min(pending_.size(), kRiff.size());
  if (pending_.compare(0, n, kRiff, 0, n) != 0) {
    phase_ = Phase::kData;
  } else if (pending_.size() >= kRiffHeaderBytes) {
    phase_ = pending_.compare(8, 4, "WAVE") == 0 ? Phase::kWavHeader : Phase::kData;
  }
}

// Walks the chunks after "RIFF<size>WAVE" as far as they have arrived; at the data chunk, drops the header
// from pending_ and enters kData.
absl::Status StreamingAudioDecoder::ParseWavHeader() {
  while (pending_.size() >= header_pos_ + 8) {
    const absl::string_view id = absl::string_view(pending_).substr(header_pos_, 4);
    const uint32_t size = Le32(pending_, header_pos_ + 4);
    if (id == "data") {
      if (!have_fmt_) return absl::InvalidArgumentError("WAV stream has its data chunk before a fmt chunk");
      // Writers that stream a WAV cannot know its length and write 0 or 0xFFFFFFFF: read to the end.
      data_bytes_left_ = (size == 0 || size == 0xFFFFFFFF) ? -1 : size;
      pending_.erase(0, header_pos_ + 8);
      phase_ = Phase::kData;
      return absl::OkStatus();
    }
    const uint64_t chunk_end = header_pos_ + 8 + uint64_t{size} + (size & 1);  // chunks pad to even sizes
    if (chunk_end > kMaxWavHeaderBytes) {
      return absl::InvalidArgumentError(absl::StrCat("WAV stream header too large: chunk '", id, "' of ", size,
                                                     " bytes ends past the ", kMaxWavHeaderBytes,
                                                     "-byte limit before the data chunk"));
    }
    if (pending_.size() < chunk_end) break;
    if (id == "fmt ") {
      if (absl::Status s = ParseFmtChunk(std::string_view(pending_).substr(header_pos_ + 8, size)); !s.ok()) {
        return s;
      }
    }
    header_pos_ = chunk_end;
  }
  if (pending_.size() > kMaxWavHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("WAV stream header too large: no data chunk within ", kMaxWavHeaderBytes, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status StreamingAudioDecoder::ParseFmtChunk(std::string_view body) {
  if (body.size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat("WAV stream fmt chunk is truncated: ", body.size(), " bytes"));
  }
  uint32_t tag = Le16(body, 0);
  // WAVE_FORMAT_EXTENSIBLE: the real tag opens the SubFormat GUID at offset 24.
  if (tag == kWaveExtensible && body.size() >= 40) tag = Le16(body, 24);
  const uint32_t bits = Le16(body, 14);
  DeclaredAudio audio;
  if (tag == kWavePcm && bits == 16) {
    audio.encoding = AudioEncoding::kLinearPcm;
  } else if ((tag == kWaveMulaw || tag == kWaveAlaw) && bits == 8) {
    audio.encoding = tag == kWaveMulaw ? AudioEncoding::kMulaw : AudioEncoding::kAlaw;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unsupported WAV format in a stream: format tag ", tag, ", ", bits,
                                                   " bits per sample (streams take 16-bit PCM, mu-law or A-law)"));
  }
  audio.channels = static_cast<int>(Le16(body, 2));
  audio.sample_rate_hz = static_cast<int>(std::min<uint32_t>(Le32(body, 4), INT_MAX));
  if (absl::Status s = ValidateRaw(audio, "the WAV header's"); !s.ok()) return s;
  source_ = audio;
  have_fmt_ = true;
  return absl::OkStatus();
}

absl::Status StreamingAudioDecoder::StartData() {
  if (source_.encoding != AudioEncoding::kLinearPcm) {
    absl::StatusOr<const float*> table = G711Table(source_.encoding);
    if (!table.ok()) return table.status();
    g711_table_ = *table;
  }
  if (source_.sample_rate_hz == target_rate_hz_) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<Resampler>> resampler = Resampler::Create(source_.sample_rate_hz, target_rate_hz_);
  if (!resampler.ok()) return resampler.status();
  resampler_ = *std::move(resampler);
  return absl::OkStatus();
}

// Decodes the whole frames that `bytes` completes; a frame cut by the chunk's end waits in pending_.
absl::Status StreamingAudioDecoder::DecodeFrames(std::string_view bytes, std::vector<float>* out) {
  // Refused from the byte count, before any of it is decoded.
  const double seconds = static_cast<double>(input_frames_ + FramesIn(bytes.size())) / source_.sample_rate_hz;
  if (absl::Status s = CheckDuration(seconds, max_seconds_, "the stream's audio with this chunk"); !s.ok()) {
    phase_ = Phase::kFinished;
    return s;
  }
  if (data_bytes_left_ >= 0) {
    if (static_cast<int64_t>(bytes.size()) >= data_bytes_left_) {
      bytes = bytes.substr(0, data_bytes_left_);
      phase_ = Phase::kAfterData;
    }
    data_bytes_left_ -= static_cast<int64_t>(bytes.size());
  }
  const size_t frame_bytes = static_cast<size_t>(SampleBytes(source_.encoding)) * source_.channels;
  std::vector<float> mono;
  mono.reserve((pending_.size() + bytes.size()) / frame_bytes);
  auto mix = [&](const char* data, size_t frames) {
    if (g711_table_ != nullptr) {
      MixG711ToMono(data, frames, source_.channels, g711_table_, &mono);
    } else {
      MixPcm16ToMono(data, frames, source_.channels, &mono);
    }
  };
  if (!pending_.empty()) {
    const size_t take = std::min(frame_bytes - pending_.size(), bytes.size());
    pending_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
    if (pending_.size() < frame_bytes) return absl::OkStatus();
    mix(pending_.data(), 1);
    pending_.clear();
  }
  const size_t frames = bytes.size() / frame_bytes;
  mix(bytes.data(), frames);
  pending_.assign(bytes.substr(frames * frame_bytes));
  input_frames_ += mono.size();
  return Emit(mono, /*end_of_input=*/false, out);
}

absl::Status StreamingAudioDecoder::Emit(const std::vector<float>& mono, bool end_of_input, std::vector<float>* out) {
  const size_t start = out->size();
  if (resampler_ == nullptr) {
    out->insert(out->end(), mono.begin(), mono.end());  // equal rates: exact pass-through
  } else if (absl::Status s = resampler_->Process(mono, end_of_input, out); !s.ok()) {
    phase_ = Phase::kFinished;
    return s;
  }
  ClampToUnit(std::span<float>(*out).subspan(start));
  return absl::OkStatus();
}

absl::Status StreamingAudioDecoder::Finish(std::vector<float>* out) {
  if (phase_ == Phase::kFinished) return absl::FailedPreconditionError("audio stream finished twice");
  if (phase_ == Phase::kWavHeader) {
    phase_ = Phase::kFinished;
    return absl::InvalidArgumentError(absl::StrCat("audio stream ended inside its WAV header (", pending_.size(),
                                                   " bytes, no data chunk)"));
  }
  if (phase_ == Phase::kSniffing) {  // fewer than 12 bytes, all a prefix of "RIFF": raw after all
    phase_ = Phase::kData;
    if (absl::Status s = StartData(); !s.ok()) return s;
    std::string data = std::move(pending_);
    pending_.clear();
    if (absl::Status s = DecodeFrames(data, out); !s.ok()) return s;
  }
  const size_t frame_bytes = static_cast<size_t>(SampleBytes(source_.encoding)) * source_.channels;
  const bool partial = !pending_.empty();
  const size_t trailing = pending_.size();
  phase_ = Phase::kFinished;
  if (partial) {
    return absl::InvalidArgumentError(absl::StrCat("audio stream ends with ", trailing,
                                                   " trailing byte(s), not a whole frame of ", frame_bytes,
                                                   " bytes (an odd byte of 16-bit PCM, or a wrong channel count)"));
  }
  return Emit({}, /*end_of_input=*/true, out);
}

}  // namespace sluice::voice
