// Resampler (libsamplerate) and the small sample helpers shared by the one-shot and streaming decoders.
#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "server/voice/audio_decode_internal.h"

namespace sluice::voice {

absl::StatusOr<std::unique_ptr<Resampler>> Resampler::Create(int source_rate_hz, int target_rate_hz) {
  const double ratio = static_cast<double>(target_rate_hz) / source_rate_hz;
  if (!src_is_valid_ratio(ratio)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resample ", source_rate_hz, " Hz to ", target_rate_hz,
                                                   " Hz: the sample rate ratio is out of libsamplerate's range"));
  }
  int error = 0;
  SRC_STATE* state = src_new(kResamplerConverter, /*channels=*/1, &error);
  if (state == nullptr) return absl::InternalError(absl::StrCat("libsamplerate src_new: ", src_strerror(error)));
  return std::unique_ptr<Resampler>(new Resampler(state, ratio));
}

Resampler::~Resampler() { src_delete(state_); }

absl::Status Resampler::Process(std::span<const float> in, bool end_of_input, std::vector<float>* out) {
  // libsamplerate ignores end_of_input when data_in is null (as an empty span's data() may be): never pass null.
  static const float kNoInput = 0;
  const float* const data_in = in.empty() ? &kNoInput : in.data();
  size_t used = 0;
  while (true) {
    const size_t remaining = in.size() - used;
    // Room for what the remaining input makes plus the filter's held-back tail; more passes if short.
    const size_t room = static_cast<size_t>(remaining * ratio_) + 1024;
    const size_t start = out->size();
    out->resize(start + room);
    SRC_DATA data = {};
    data.data_in = data_in + used;
    data.input_frames = static_cast<long>(remaining);
    data.data_out = out->data() + start;
    data.output_frames = static_cast<long>(room);
    data.end_of_input = end_of_input ? 1 : 0;
    data.src_ratio = ratio_;
    const int error = src_process(state_, &data);
    out->resize(start + (error == 0 ? data.output_frames_gen : 0));
    if (error != 0) return absl::InternalError(absl::StrCat("libsamplerate src_process: ", src_strerror(error)));
    used += data.input_frames_used;
    const bool output_full = data.output_frames_gen == data.output_frames;
    if (used == in.size() && !output_full && (!end_of_input || data.output_frames_gen == 0)) return absl::OkStatus();
    if (data.input_frames_used == 0 && data.output_frames_gen == 0) {
      return absl::InternalError("libsamplerate made no progress");  // guards the loop; not expected
    }
  }
}

absl::Status ValidateRate(int rate_hz, absl::string_view what) {
  if (rate_hz >= kMinAudioRateHz && rate_hz <= kMaxAudioRateHz) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, " is ", rate_hz, " Hz: the sample rate must be ",
                                                 kMinAudioRateHz, "..", kMaxAudioRateHz, " Hz"));
}

absl::Status ValidateChannels(int channels, absl::string_view what) {
  if (channels >= 1 && channels <= kMaxAudioChannels) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " is ", channels, ": the channel count must be 1..", kMaxAudioChannels));
}

absl::Status CheckDuration(double seconds, double max_seconds, absl::string_view what) {
  if (seconds <= max_seconds) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " lasts ", seconds, " s, longer than the limit of ", max_seconds, " s (max_audio_seconds)"));
}

void MixPcm16ToMono(const char* bytes, size_t frames, int channels, std::vector<float>* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes);
  for (size_t f = 0; f < frames; ++f) {
    float sum = 0;
    for (int c = 0; c < channels; ++c, p += 2) sum += static_cast<int16_t>(p[0] | (p[1] << 8)) / 32768.0f;
    out->push_back(sum / channels);
  }
}

void MixG711ToMono(const char* bytes, size_t frames, int channels, const float* table, std::vector<float>* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes);
  for (size_t f = 0; f < frames; ++f) {
    float sum = 0;
    for (int c = 0; c < channels; ++c) sum += table[*p++];
    out->push_back(sum / channels);
  }
}

void ClampToUnit(std::span<float> samples) {
  for (float& x : samples) x = std::clamp(x, -1.0f, 1.0f);
}

}  // namespace sluice::voice
