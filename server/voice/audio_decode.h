// Audio bytes as a Riva client sends them -> mono float samples at the model's rate. libsndfile decodes
// containers (WAV, FLAC, OGG Vorbis/Opus, AIFF, AU) and G.711 (mu-law, A-law); libsamplerate resamples.
// DecodeAudio takes a whole file (offline Recognize); StreamingAudioDecoder takes chunks of any size
// (StreamingRecognize) and resamples statefully, so its output matches one-shot decoding of the same bytes.
// Thread-safety: DecodeAudio is a pure function, safe from any thread. A StreamingAudioDecoder is owned by
// one stream and is not thread-safe; distinct decoders are independent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace sluice::voice {

// The declared encoding, numbered as nvidia.riva.AudioEncoding (wire facts).
enum class AudioEncoding { kUnspecified = 0, kLinearPcm = 1, kFlac = 2, kMulaw = 3, kOggOpus = 4, kAlaw = 20 };

// What the request says about its audio. Containers override it; raw bytes need all of it.
struct DeclaredAudio {
  AudioEncoding encoding = AudioEncoding::kLinearPcm;
  int sample_rate_hz = 0;
  int channels = 1;
};

// Limits on what a request may declare or a header hold: they bound memory and refuse nonsense early.
// (libsamplerate further needs target/source within 1/256..256, checked when resampling.)
inline constexpr int kMaxAudioChannels = 32;
inline constexpr int kMinAudioRateHz = 1000;
inline constexpr int kMaxAudioRateHz = 768000;

struct DecodedAudio {
  std::vector<float> samples;  // mono, at target_rate_hz, in [-1, 1]
  int target_rate_hz = 0;
  int source_rate_hz = 0;
  int source_channels = 0;
  std::string format;  // "wav", "flac", "ogg", "aiff", "au", "raw-pcm16", "raw-mulaw", "raw-alaw"

  double seconds() const;  // samples.size() / target_rate_hz; 0 when the rate is unset
};

// What a whole file holds, read without decoding a sample: from the byte count and the declared encoding (raw
// audio), or from the container's header (libsndfile's SF_INFO, opened but not read).
struct AudioExtent {
  std::string format;      // as DecodedAudio::format
  int source_rate_hz = 0;
  int source_channels = 0;
  int64_t frames = -1;     // -1 when the header does not say (the decoder still stops at max_seconds)
};

// Every refusal DecodeAudio makes before decoding (bad encoding, rate, channels, byte count, a header libsndfile
// refuses, audio longer than max_seconds), with the same errors, at the cost of reading the header only: callers
// refuse from sizes before they queue or run any decoding.
absl::StatusOr<AudioExtent> ProbeAudio(std::string_view bytes, const DeclaredAudio& declared, double max_seconds);

// The memory a decode of `extent` to target_rate_hz holds at its peak (mono floats at the source rate plus the
// resampled output); max_seconds' worth when the header gives no frame count. For admission (DecodeExecutor).
int64_t DecodePeakBytes(const AudioExtent& extent, int target_rate_hz, double max_seconds);

// Whole-file decoding. Bytes that start with a container header (WAV "RIFF....WAVE", FLAC "fLaC", OGG "OggS",
// AIFF "FORM....AIFF", AU ".snd") are decoded as that container whatever the declared encoding (Riva's client
// sends whole WAV files declared as LINEAR_PCM), and the container's rate and channels win. Otherwise the bytes
// are raw, interleaved, in the declared encoding (LINEAR_PCM = 16-bit little-endian, MULAW, ALAW) at the
// declared rate and channel count. Channels are mixed to mono (their mean), then resampled to target_rate_hz.
// Errors (all InvalidArgument, naming the problem): unsupported or unspecified encoding for raw bytes, OGGOPUS
// or FLAC declared over bytes that are not that container, a bad rate or channel count, a PCM16 byte count that
// is not whole frames, a header rate or channel count of 0 (named, not libsndfile's "Internal error"), a corrupt or
// truncated container (with libsndfile's message), no samples, or audio longer than max_seconds (refused from
// the header or byte count before decoding it all).
// REQUIRES: target_rate_hz within [kMinAudioRateHz, kMaxAudioRateHz], max_seconds > 0 (else InvalidArgument).
absl::StatusOr<DecodedAudio> DecodeAudio(std::string_view bytes, const DeclaredAudio& declared,
                                         int target_rate_hz, double max_seconds);

class Resampler;  // libsamplerate state; server/voice/audio_decode_internal.h

// Raw audio arriving in chunks of any size (a chunk may end inside a sample or a frame). If the stream begins
// with a WAV header ("RIFF....WAVE", fmt chunk of PCM16, mu-law or A-law), the header is buffered until
// complete (at most kMaxWavHeaderBytes), its rate/channels/format replace the declared ones, and only the data
// chunk's bytes are decoded (bytes past a data chunk of known size are ignored). Equal source and target rates
// pass through exactly; otherwise one libsamplerate state runs across chunks, so chunk boundaries are seamless.
// The stream's length is bounded by max_seconds of source audio: a chunk that would pass it is refused
// (InvalidArgument naming the limit) from its byte count, before any of it is decoded. After an error, discard
// the decoder.
class StreamingAudioDecoder {
 public:
  static constexpr size_t kMaxWavHeaderBytes = 64 * 1024;

  // Raw encodings only (LINEAR_PCM 16-bit, MULAW, ALAW) with a valid rate and channel count; InvalidArgument
  // otherwise.
  // max_seconds must be > 0 (infinity: no limit).
  static absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> Create(
      const DeclaredAudio& declared, int target_rate_hz,
      double max_seconds = std::numeric_limits<double>::infinity());
  ~StreamingAudioDecoder();
  StreamingAudioDecoder(const StreamingAudioDecoder&) = delete;
  StreamingAudioDecoder& operator=(const StreamingAudioDecoder&) = delete;

  // Appends the mono samples at the target rate that `bytes` complete to *out. InvalidArgument for a bad or
  // oversized WAV header or audio past max_seconds; FailedPrecondition after Finish.
  absl::Status Append(std::string_view bytes, std::vector<float>* out);
  // Without decoding: InvalidArgument when the chunk `bytes` would take the stream past max_seconds (exact once
  // the format is known — raw audio, or after a WAV header; while a WAV header is awaited Append checks it), and
  // an upper bound of the memory Append(bytes) holds at its peak (as DecodePeakBytes), for deciding where to
  // decode the chunk.
  absl::StatusOr<int64_t> CheckRoomFor(std::string_view bytes) const;
  // End of stream: flushes the resampler's tail into *out. InvalidArgument if bytes are left that do not make
  // a whole frame (e.g. an odd byte of PCM16) or the stream ended inside a WAV header.
  absl::Status Finish(std::vector<float>* out);

  int64_t input_frames() const { return input_frames_; }  // source frames decoded so far
  int source_rate_hz() const { return source_.sample_rate_hz; }  // the WAV header's once parsed
  int source_channels() const { return source_.channels; }

 private:
  enum class Phase { kSniffing, kWavHeader, kData, kAfterData, kFinished };

  StreamingAudioDecoder(const DeclaredAudio& declared, int target_rate_hz, double max_seconds);
  int64_t FramesIn(size_t bytes) const;  // whole frames that pending_ + `bytes` hold (in kData)
  bool StaysRaw(std::string_view bytes) const;
  void Sniff();
  absl::Status ParseWavHeader();
  absl::Status ParseFmtChunk(std::string_view body);
  absl::Status StartData();
  absl::Status DecodeFrames(std::string_view bytes, std::vector<float>* out);
  absl::Status Emit(const std::vector<float>& mono, bool end_of_input, std::vector<float>* out);

  DeclaredAudio source_;  // the declared audio, until a WAV header replaces it
  const int target_rate_hz_;
  const double max_seconds_;
  Phase phase_ = Phase::kSniffing;
  std::string pending_;             // header bytes while sniffing/parsing; then a partial frame
  size_t header_pos_ = 12;          // next unparsed WAV chunk, past "RIFF<size>WAVE"
  bool have_fmt_ = false;           // the WAV fmt chunk was parsed into source_
  int64_t data_bytes_left_ = -1;    // of the WAV data chunk; -1 when unbounded (raw, or a streamed WAV)
  int64_t input_frames_ = 0;
  const float* g711_table_ = nullptr;     // for mu-law and A-law
  std::unique_ptr<Resampler> resampler_;  // null when source and target rates are equal
};

}  // namespace sluice::voice
