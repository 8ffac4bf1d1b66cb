// Pieces shared by DecodeAudio and StreamingAudioDecoder (sluice_voice_audio's own sources only): the
// libsamplerate wrapper, G.711 tables produced by libsndfile, and the rate/channel checks.
// Thread-safety: the free functions are pure (the G.711 tables are built once, thread-safely); a Resampler
// belongs to one caller.
#pragma once

#include <samplerate.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>

#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/voice/audio_decode.h"

namespace sluice::voice {

// Band-limited sinc at medium quality: 97 dB SNR with 90% of the band kept, i.e. speech up to 7.2 kHz at a
// 16 kHz target, where a log-mel front end's top filters sit (FASTEST keeps only 80%, cutting at 6.4 kHz).
// SRC_SINC_BEST_QUALITY's extra 7% of band costs several times the CPU and changes nothing for recognition.
inline constexpr int kResamplerConverter = SRC_SINC_MEDIUM_QUALITY;

// One mono libsamplerate state. The sinc filter holds back the input it still needs as lookahead, so output
// lags input until Process(..., end_of_input = true) flushes the tail; the concatenated output does not
// depend on how the input was cut.
class Resampler {
 public:
  // REQUIRES: both rates valid (ValidateRate).
  static absl::StatusOr<std::unique_ptr<Resampler>> Create(int source_rate_hz, int target_rate_hz);
  ~Resampler();
  Resampler(const Resampler&) = delete;
  Resampler& operator=(const Resampler&) = delete;

  // Appends the samples `in` completes to *out; with end_of_input, also the tail. No calls after that.
  absl::Status Process(std::span<const float> in, bool end_of_input, std::vector<float>* out);

 private:
  Resampler(SRC_STATE* state, double ratio) : state_(state), ratio_(ratio) {}
  SRC_STATE* state_;  // owned; src_delete'd
  double ratio_;      // target / source
};

// InvalidArgument unless rate_hz lies in [kMinAudioRateHz, kMaxAudioRateHz]; `what` names the value
// ("sample_rate_hertz", "the wav header's sample rate").
absl::Status ValidateRate(int rate_hz, absl::string_view what);
// InvalidArgument unless 1 <= channels <= kMaxAudioChannels; `what` names the value.
absl::Status ValidateChannels(int channels, absl::string_view what);
// InvalidArgument when `seconds` exceeds `max_seconds`, saying both.
absl::Status CheckDuration(double seconds, double max_seconds, absl::string_view what);

// The 256 float values libsndfile decodes each mu-law (or A-law) byte to; Internal if libsndfile cannot.
// REQUIRES: encoding is kMulaw or kAlaw.
absl::StatusOr<const float*> G711Table(AudioEncoding encoding);

// Mixes `frames` interleaved little-endian int16 frames of `channels` channels to mono floats (their mean,
// scaled by 1/32768 as libsndfile does), appended to *out.
void MixPcm16ToMono(const char* bytes, size_t frames, int channels, std::vector<float>* out);
// The same for interleaved G.711 bytes through `table` (G711Table).
void MixG711ToMono(const char* bytes, size_t frames, int channels, const float* table, std::vector<float>* out);

// Clamps samples to [-1, 1] (float containers and the resampler's ringing may step slightly outside).
void ClampToUnit(std::span<float> samples);

}  // namespace sluice::voice
