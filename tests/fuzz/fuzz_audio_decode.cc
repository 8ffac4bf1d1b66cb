// Fuzzes the voice API's audio decoding (server/voice/audio_decode.h): DecodeAudio on arbitrary bytes (WAV, FLAC,
// OGG, AIFF and AU containers through libsndfile, raw PCM16 / mu-law / A-law) with a declared encoding, rate and
// channel count, and, when the declared encoding is raw, StreamingAudioDecoder on the same bytes cut into chunks.
// Input layout: 8 chooser bytes, then the audio bytes.
//   [0]    declared encoding, b % 7: 0..5 -> UNSPECIFIED, LINEAR_PCM, FLAC, MULAW, OGGOPUS, ALAW; 6 -> undefined (7)
//   [1..3] declared rate, 24 bits: with the top bit set one of the common rates, else 1000 + v % 767001 (Hz)
//   [4]    declared channels: 1 + (b & 3)
//   [5]    max_seconds: 30, 1, 0.05 or 0.001 (b & 3)
//   [6, 7] streaming chunk sizes: chunks cycle through 1 + b6, 1 + 13 * b7 bytes
// The target rate is 16 kHz, as the speech models'.
// Asserts beyond "no crash, no ASan/UBSan report":
//   - DecodeAudio: errors are InvalidArgument (as documented); a success has target_rate_hz 16000, a source rate
//     and channel count within the documented limits, a known format name, at least one sample, every sample
//     finite and within [-1, 1] (DecodeAudio clamps after resampling, so no ringing slack is needed), and at most
//     max_seconds * 16000 + ceil(16000 / source rate) + 16 samples (the source is refused past max_seconds of
//     frames; the resampler adds at most a few output samples of rounding at its ends).
//   - StreamingAudioDecoder (raw declared encodings): Create succeeds; errors are InvalidArgument or
//     FailedPrecondition; every sample is finite and within [-1, 1]; the output is at most input_frames() * 16000 /
//     source rate + ceil(16000 / source rate) + 16 samples; after Finish, Append and Finish are FailedPrecondition.
//   - Both, on bytes that are raw to both (no container magic): if DecodeAudio succeeds the stream succeeds too,
//     decodes as many source frames as the bytes hold, and matches the one-shot samples (exactly at equal rates,
//     within 3 samples of length and 1e-3 of value when resampled: the documented seamless chunk boundaries).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/voice/audio_decode.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice::fuzz {
namespace {

using voice::AudioEncoding;
using voice::DeclaredAudio;
using voice::DecodedAudio;
using voice::StreamingAudioDecoder;

constexpr int kTargetRate = 16000;
constexpr size_t kChooserBytes = 8;
constexpr int kCommonRates[] = {8000, 16000, 11025, 22050, 44100, 48000, 96000, 1000, 768000, 16001, 7999, 32000};
constexpr double kMaxSeconds[] = {30, 1, 0.05, 0.001};

AudioEncoding EncodingFrom(uint8_t b) {
  switch (b % 7) {
    case 0: return AudioEncoding::kUnspecified;
    case 1: return AudioEncoding::kLinearPcm;
    case 2: return AudioEncoding::kFlac;
    case 3: return AudioEncoding::kMulaw;
    case 4: return AudioEncoding::kOggOpus;
    case 5: return AudioEncoding::kAlaw;
    default: return static_cast<AudioEncoding>(7);  // not an encoding the decoder knows
  }
}

bool IsRaw(AudioEncoding e) {
  return e == AudioEncoding::kLinearPcm || e == AudioEncoding::kMulaw || e == AudioEncoding::kAlaw;
}

// What DecodeAudio's container sniffing would see: the bytes begin with a container's magic.
bool LooksLikeContainer(std::string_view b) {
  auto at = [&](size_t pos, std::string_view magic) { return b.size() >= pos + 4 && b.substr(pos, 4) == magic; };
  return ((at(0, "RIFF") || at(0, "RIFX") || at(0, "RF64")) && at(8, "WAVE")) || at(0, "fLaC") || at(0, "OggS") ||
         (at(0, "FORM") && (at(8, "AIFF") || at(8, "AIFC"))) || at(0, ".snd");
}

// The most output samples `frames` source frames at `source_rate` may resample to at kTargetRate.
double MaxOutput(double frames, int source_rate) {
  return frames * kTargetRate / source_rate + std::ceil(static_cast<double>(kTargetRate) / source_rate) + 16;
}

void CheckSamples(const std::vector<float>& samples, const char* who) {
  for (size_t i = 0; i < samples.size(); ++i) {
    const float x = samples[i];
    FUZZ_CHECK(std::isfinite(x) && x >= -1.0f && x <= 1.0f, absl::StrCat(who, " sample ", i, " is ", x));
  }
}

void CheckDecoded(const DecodedAudio& audio, double max_seconds) {
  FUZZ_CHECK(audio.target_rate_hz == kTargetRate, absl::StrCat(audio.target_rate_hz));
  FUZZ_CHECK(audio.source_rate_hz >= voice::kMinAudioRateHz && audio.source_rate_hz <= voice::kMaxAudioRateHz,
             absl::StrCat("source rate ", audio.source_rate_hz));
  FUZZ_CHECK(audio.source_channels >= 1 && audio.source_channels <= voice::kMaxAudioChannels,
             absl::StrCat("source channels ", audio.source_channels));
  static const std::string_view kFormats[] = {"wav", "flac", "ogg", "aiff", "au", "raw-pcm16", "raw-mulaw",
                                              "raw-alaw"};
  FUZZ_CHECK(std::find(std::begin(kFormats), std::end(kFormats), audio.format) != std::end(kFormats), audio.format);
  FUZZ_CHECK(!audio.samples.empty(), audio.format);
  const double bound = MaxOutput(max_seconds * audio.source_rate_hz, audio.source_rate_hz);
  FUZZ_CHECK(static_cast<double>(audio.samples.size()) <= bound,
             absl::StrCat(audio.format, ": ", audio.samples.size(), " samples at ", audio.source_rate_hz,
                          " Hz -> 16 kHz, more than ", bound, " for max_seconds ", max_seconds));
  CheckSamples(audio.samples, "DecodeAudio");
}

struct StreamResult {
  bool ok = false;
  std::vector<float> samples;
  int64_t input_frames = 0;
};

StreamResult Stream(std::string_view bytes, const DeclaredAudio& declared, size_t chunk_a, size_t chunk_b) {
  StreamResult result;
  absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> created =
      StreamingAudioDecoder::Create(declared, kTargetRate);
  FUZZ_CHECK(created.ok(), created.status().ToString());
  StreamingAudioDecoder& decoder = **created;
  auto check_error = [](const absl::Status& s) {
    FUZZ_CHECK(absl::IsInvalidArgument(s) || absl::IsFailedPrecondition(s), s.ToString());
  };
  size_t pos = 0;
  for (int i = 0; pos < bytes.size(); ++i) {
    const size_t n = std::min(i % 2 == 0 ? chunk_a : chunk_b, bytes.size() - pos);
    const absl::Status s = decoder.Append(bytes.substr(pos, n), &result.samples);
    pos += n;
    if (!s.ok()) {  // the decoder is to be discarded after an error
      check_error(s);
      CheckSamples(result.samples, "StreamingAudioDecoder");
      return result;
    }
  }
  const absl::Status finished = decoder.Finish(&result.samples);
  CheckSamples(result.samples, "StreamingAudioDecoder");
  if (!finished.ok()) {
    check_error(finished);
    return result;
  }
  result.ok = true;
  result.input_frames = decoder.input_frames();
  const int source_rate = decoder.source_rate_hz();
  FUZZ_CHECK(source_rate >= voice::kMinAudioRateHz && source_rate <= voice::kMaxAudioRateHz,
             absl::StrCat("stream source rate ", source_rate));
  FUZZ_CHECK(decoder.source_channels() >= 1 && decoder.source_channels() <= voice::kMaxAudioChannels,
             absl::StrCat("stream channels ", decoder.source_channels()));
  FUZZ_CHECK(result.input_frames >= 0 && static_cast<size_t>(result.input_frames) <= bytes.size(),
             absl::StrCat("stream input frames ", result.input_frames, " from ", bytes.size(), " bytes"));
  const double bound = MaxOutput(static_cast<double>(result.input_frames), source_rate);
  FUZZ_CHECK(static_cast<double>(result.samples.size()) <= bound,
             absl::StrCat("stream: ", result.samples.size(), " samples from ", result.input_frames, " frames at ",
                          source_rate, " Hz, more than ", bound));
  std::vector<float> more;
  FUZZ_CHECK(absl::IsFailedPrecondition(decoder.Append("x", &more)), "Append after Finish");
  FUZZ_CHECK(absl::IsFailedPrecondition(decoder.Finish(&more)), "Finish after Finish");
  FUZZ_CHECK(more.empty(), "samples after Finish");
  return result;
}

}  // namespace
}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice::fuzz;
  if (size < kChooserBytes) return 0;
  DeclaredAudio declared;
  declared.encoding = EncodingFrom(data[0]);
  const uint32_t rate_bits = uint32_t{data[1]} << 16 | uint32_t{data[2]} << 8 | data[3];
  declared.sample_rate_hz = (rate_bits & 0x800000) != 0
                                ? kCommonRates[rate_bits % std::size(kCommonRates)]
                                : static_cast<int>(1000 + rate_bits % 767001);
  declared.channels = 1 + (data[4] & 3);
  const double max_seconds = kMaxSeconds[data[5] & 3];
  const size_t chunk_a = 1 + data[6];
  const size_t chunk_b = 1 + 13 * size_t{data[7]};
  const std::string_view bytes(reinterpret_cast<const char*>(data) + kChooserBytes, size - kChooserBytes);

  absl::StatusOr<DecodedAudio> whole = sluice::voice::DecodeAudio(bytes, declared, kTargetRate, max_seconds);
  if (whole.ok()) {
    CheckDecoded(*whole, max_seconds);
  } else {
    FUZZ_CHECK(absl::IsInvalidArgument(whole.status()), whole.status().ToString());
  }
  if (!IsRaw(declared.encoding)) return 0;

  const StreamResult streamed = Stream(bytes, declared, chunk_a, chunk_b);
  if (!whole.ok() || LooksLikeContainer(bytes)) return 0;
  // Raw to both: the stream must decode what the one-shot decoder did.
  FUZZ_CHECK(streamed.ok, "DecodeAudio succeeded on raw bytes that the stream refused");
  const size_t frame_bytes = (declared.encoding == AudioEncoding::kLinearPcm ? 2 : 1) * size_t(declared.channels);
  FUZZ_CHECK(static_cast<size_t>(streamed.input_frames) == bytes.size() / frame_bytes,
             absl::StrCat("stream decoded ", streamed.input_frames, " frames of ", bytes.size(), " bytes"));
  const std::vector<float>& a = whole->samples;
  const std::vector<float>& b = streamed.samples;
  if (declared.sample_rate_hz == kTargetRate) {
    FUZZ_CHECK(a == b, absl::StrCat("equal rates: one-shot ", a.size(), " samples, streamed ", b.size()));
    return 0;
  }
  FUZZ_CHECK(std::max(a.size(), b.size()) - std::min(a.size(), b.size()) <= 3,
             absl::StrCat("resampled lengths differ: one-shot ", a.size(), ", streamed ", b.size()));
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    FUZZ_CHECK(std::abs(a[i] - b[i]) <= 1e-3f,
               absl::StrCat("sample ", i, ": one-shot ", a[i], ", streamed ", b[i], " (", declared.sample_rate_hz,
                            " Hz, chunks ", chunk_a, "/", chunk_b, ")"));
  }
  return 0;
}
