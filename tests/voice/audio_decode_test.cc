// DecodeAudio on real files written by libsndfile in memory: WAV/FLAC/OGG/AIFF/AU and raw PCM16/mu-law/A-law decode to
// mono at the target rate (exactly when no resampling is needed; frequency and length kept when it is), the
// container's header wins over the declared rate, channels mix to their mean, and every bad input is refused
// with InvalidArgument naming its problem, long audio before it is decoded.
#include "server/voice/audio_decode.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "tests/voice/audio_test_files.h"

namespace sluice::voice {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Encode;
using testing::MaxDistanceToSine;
using testing::RawPcm16;
using testing::Sine;
using testing::ToPcm16;
using testing::ZeroCrossings;

constexpr int kWav16 = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
constexpr DeclaredAudio kPcm16k = {AudioEncoding::kLinearPcm, 16000, 1};

// Known extremes and steps, then a sine.
std::vector<int16_t> KnownValuesAndSine(int rate) {
  std::vector<int16_t> x = {0, 1, -1, 32767, -32768, 16384, -16384, 1000};
  for (int16_t v : ToPcm16(Sine(440, rate, 0.5))) x.push_back(v);
  return x;
}

absl::Status DecodeError(std::string_view bytes, const DeclaredAudio& declared, double max_seconds = 60) {
  return DecodeAudio(bytes, declared, 16000, max_seconds).status();
}

TEST(DecodeAudioTest, Wav16kPassesThroughExactly) {
  const std::vector<int16_t> x = KnownValuesAndSine(16000);
  absl::StatusOr<DecodedAudio> audio = DecodeAudio(Encode(x, 16000, 1, kWav16), kPcm16k, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_EQ(audio->format, "wav");
  EXPECT_EQ(audio->source_rate_hz, 16000);
  EXPECT_EQ(audio->source_channels, 1);
  ASSERT_EQ(audio->samples.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(audio->samples[i], x[i] / 32768.0f) << i;
  EXPECT_DOUBLE_EQ(audio->seconds(), x.size() / 16000.0);
}

class ResampleTest : public ::testing::TestWithParam<int> {};

// One second of 440 Hz at each rate: 16000 samples at 16 kHz (+-4), 880 zero crossings, the same sine.
TEST_P(ResampleTest, WavResamplesTo16kKeepingLengthAndFrequency) {
  const int rate = GetParam();
  absl::StatusOr<DecodedAudio> audio =
      DecodeAudio(Encode(ToPcm16(Sine(440, rate, 1.0)), rate, 1, kWav16), kPcm16k, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_EQ(audio->source_rate_hz, rate);
  EXPECT_NEAR(static_cast<double>(audio->samples.size()), 16000, 4);
  EXPECT_NEAR(audio->seconds(), 1.0, 4 / 16000.0);
  EXPECT_NEAR(ZeroCrossings(audio->samples, 0, audio->samples.size()), 880, 2);
  // Away from the edges (where the sinc filter sees the signal start and stop) it is the same sine.
  EXPECT_LT(MaxDistanceToSine(audio->samples, 440, 16000, 400, 15600), 0.01);
}

INSTANTIATE_TEST_SUITE_P(Rates, ResampleTest, ::testing::Values(8000, 22050, 44100, 48000));

TEST(DecodeAudioTest, StereoMixesToTheMeanOfChannels) {
  std::vector<int16_t> interleaved;
  const std::vector<int16_t> left = ToPcm16(Sine(300, 16000, 0.25));
  for (size_t i = 0; i < left.size(); ++i) interleaved.insert(interleaved.end(), {left[i], int16_t(1000 - i % 7)});
  absl::StatusOr<DecodedAudio> audio = DecodeAudio(Encode(interleaved, 16000, 2, kWav16), kPcm16k, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_EQ(audio->source_channels, 2);
  ASSERT_EQ(audio->samples.size(), left.size());
  for (size_t i = 0; i < left.size(); ++i) {
    ASSERT_FLOAT_EQ(audio->samples[i], (left[i] + (1000 - static_cast<int>(i % 7))) / 65536.0f) << i;
  }
}

TEST(DecodeAudioTest, FlacAiffAndAuDecodeLosslessly) {
  const std::vector<int16_t> x = KnownValuesAndSine(16000);
  for (auto [format, name] : {std::pair{SF_FORMAT_FLAC, "flac"}, std::pair{SF_FORMAT_AIFF, "aiff"},
                              std::pair{SF_FORMAT_AU, "au"}}) {
    absl::StatusOr<DecodedAudio> audio =
        DecodeAudio(Encode(x, 16000, 1, format | SF_FORMAT_PCM_16), {AudioEncoding::kFlac, 0, 1}, 16000, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->format, name);
    ASSERT_EQ(audio->samples.size(), x.size());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(audio->samples[i], x[i] / 32768.0f) << name << " " << i;
  }
}

TEST(DecodeAudioTest, OggVorbisIsRefusedBeforeLibsndfileSeesIt) {
  // libsndfile leaks on malformed Vorbis headers (audio_decode.cc says more): Vorbis is not accepted at all.
  const std::string vorbis = Encode(Sine(440, 44100, 1.0), 44100, 1, SF_FORMAT_OGG | SF_FORMAT_VORBIS);
  EXPECT_THAT(DecodeError(vorbis, {AudioEncoding::kLinearPcm, 16000, 1}).ToString(),
              AllOf(HasSubstr("ogg audio must carry Opus"), HasSubstr("Vorbis")));
  EXPECT_THAT(DecodeError("OggS", {AudioEncoding::kOggOpus, 16000, 1}).ToString(), HasSubstr("Opus"));
}

// The bytes of an OGG file's first page (header, segment table, body).
std::string FirstOggPage(const std::string& ogg) {
  const size_t segments = static_cast<uint8_t>(ogg.at(26));
  size_t body = 0;
  for (size_t i = 0; i < segments; ++i) body += static_cast<uint8_t>(ogg.at(27 + i));
  return ogg.substr(0, 27 + segments + body);
}

TEST(DecodeAudioTest, OggWhoseFirstValidPageIsVorbisIsRefused) {
  // libogg skips bytes that do not form a page (a bad checksum, a cut-off page) and libsndfile picks the codec
  // from the first page it accepts: an Opus-looking first page that libogg skips must not let Vorbis through.
  const std::string vorbis = Encode(Sine(440, 16000, 0.5), 16000, 1, SF_FORMAT_OGG | SF_FORMAT_VORBIS);
  const std::string opus_page = FirstOggPage(Encode(Sine(440, 48000, 0.1), 48000, 1, SF_FORMAT_OGG | SF_FORMAT_OPUS));
  ASSERT_EQ(opus_page.substr(27 + static_cast<uint8_t>(opus_page[26]), 8), "OpusHead");
  std::string bad_checksum = opus_page;
  bad_checksum[22] = static_cast<char>(bad_checksum[22] ^ 0x5A);  // the page's CRC-32
  const std::string cut_off = opus_page.substr(0, opus_page.size() - 3);
  for (const std::string& first : {bad_checksum, cut_off}) {
    EXPECT_THAT(DecodeError(first + vorbis, {AudioEncoding::kOggOpus, 16000, 1}).ToString(),
                HasSubstr("ogg audio must carry Opus"));
  }
  // The same page intact in front of nothing else is accepted as far as the codec goes (libsndfile then finds no
  // audio): the refusal above is about the skipped page, not the page itself.
  EXPECT_THAT(DecodeError(opus_page, {AudioEncoding::kOggOpus, 16000, 1}).ToString(),
              Not(HasSubstr("must carry Opus")));
}

TEST(DecodeAudioTest, OggOpusDecodesToTheSine) {
  struct Case { int format; int rate; AudioEncoding declared; };
  for (const Case& c : {Case{SF_FORMAT_OGG | SF_FORMAT_OPUS, 48000, AudioEncoding::kOggOpus},
                        Case{SF_FORMAT_OGG | SF_FORMAT_OPUS, 48000, AudioEncoding::kLinearPcm}}) {
    SCOPED_TRACE(c.format);
    const std::string ogg = Encode(Sine(440, c.rate, 1.0), c.rate, 1, c.format);
    absl::StatusOr<DecodedAudio> audio = DecodeAudio(ogg, {c.declared, 16000, 1}, 16000, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->format, "ogg");
    EXPECT_EQ(audio->source_rate_hz, c.rate);
    EXPECT_NEAR(static_cast<double>(audio->samples.size()), 16000, 16);
    EXPECT_NEAR(ZeroCrossings(audio->samples, 0, audio->samples.size()), 880, 4);
    EXPECT_LT(MaxDistanceToSine(audio->samples, 440, 16000, 1600, 14400), 0.05);  // lossy codecs
  }
}

TEST(DecodeAudioTest, WavHeaderRateAndChannelsWinOverTheDeclaredOnes) {
  const std::string wav = Encode(ToPcm16(Sine(440, 8000, 1.0)), 8000, 1, kWav16);
  for (AudioEncoding declared : {AudioEncoding::kLinearPcm, AudioEncoding::kUnspecified, AudioEncoding::kMulaw}) {
    absl::StatusOr<DecodedAudio> audio = DecodeAudio(wav, {declared, 44100, 2}, 16000, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->source_rate_hz, 8000);
    EXPECT_EQ(audio->source_channels, 1);
    EXPECT_NEAR(static_cast<double>(audio->samples.size()), 16000, 4);
  }
}

TEST(DecodeAudioTest, RawPcm16At8kResamplesAndAt16kPassesThrough) {
  absl::StatusOr<DecodedAudio> audio =
      DecodeAudio(RawPcm16(ToPcm16(Sine(440, 8000, 1.0))), {AudioEncoding::kLinearPcm, 8000, 1}, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_EQ(audio->format, "raw-pcm16");
  EXPECT_NEAR(static_cast<double>(audio->samples.size()), 16000, 4);
  EXPECT_LT(MaxDistanceToSine(audio->samples, 440, 16000, 400, 15600), 0.01);

  const std::vector<int16_t> x = KnownValuesAndSine(16000);
  audio = DecodeAudio(RawPcm16(x), kPcm16k, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  ASSERT_EQ(audio->samples.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(audio->samples[i], x[i] / 32768.0f) << i;
}

TEST(DecodeAudioTest, RawStereoPcm16MixesToMean) {
  const std::vector<int16_t> interleaved = {100, 300, -32768, 32767, 2, 4};
  absl::StatusOr<DecodedAudio> audio =
      DecodeAudio(RawPcm16(interleaved), {AudioEncoding::kLinearPcm, 16000, 2}, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_THAT(audio->samples, ::testing::ElementsAre(200 / 32768.0f, -0.5f / 32768.0f, 3 / 32768.0f));
}

TEST(DecodeAudioTest, RawMulawAndAlawDecodeThroughLibsndfile) {
  for (auto [encoding, subtype, name] : {std::tuple{AudioEncoding::kMulaw, SF_FORMAT_ULAW, "raw-mulaw"},
                                         std::tuple{AudioEncoding::kAlaw, SF_FORMAT_ALAW, "raw-alaw"}}) {
    const std::string g711 = Encode(ToPcm16(Sine(440, 8000, 1.0)), 8000, 1, SF_FORMAT_RAW | subtype);
    ASSERT_EQ(g711.size(), 8000u);  // one byte a sample, no header
    absl::StatusOr<DecodedAudio> audio = DecodeAudio(g711, {encoding, 8000, 1}, 8000, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_EQ(audio->format, name);
    ASSERT_EQ(audio->samples.size(), 8000u);
    EXPECT_LT(MaxDistanceToSine(audio->samples, 440, 8000, 0, 8000), 0.02);  // G.711's quantization
    audio = DecodeAudio(g711, {encoding, 8000, 1}, 16000, 60);
    ASSERT_TRUE(audio.ok()) << audio.status();
    EXPECT_NEAR(static_cast<double>(audio->samples.size()), 16000, 4);
  }
}

TEST(DecodeAudioTest, UnusableEncodingsAreRefused) {
  const std::string raw = RawPcm16({1, 2, 3, 4});
  EXPECT_THAT(DecodeError(raw, {AudioEncoding::kUnspecified, 16000, 1}).ToString(), HasSubstr("unspecified"));
  EXPECT_THAT(DecodeError(raw, {AudioEncoding::kOggOpus, 16000, 1}).ToString(), HasSubstr("OGGOPUS"));
  EXPECT_THAT(DecodeError(raw, {AudioEncoding::kFlac, 16000, 1}).ToString(), HasSubstr("FLAC"));
  const absl::Status unknown = DecodeError(raw, {static_cast<AudioEncoding>(7), 16000, 1});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.ToString(), AllOf(HasSubstr("unsupported"), HasSubstr("7")));
}

TEST(DecodeAudioTest, BadRawRatesChannelsAndByteCountsAreRefused) {
  const std::string raw = RawPcm16({1, 2, 3, 4});
  for (int rate : {0, -8000, 10, 10000000}) {
    const absl::Status s = DecodeError(raw, {AudioEncoding::kLinearPcm, rate, 1});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.ToString(), HasSubstr("sample rate")) << rate;
  }
  for (int channels : {0, -1, 33}) {
    EXPECT_THAT(DecodeError(raw, {AudioEncoding::kLinearPcm, 16000, channels}).ToString(), HasSubstr("channel"));
  }
  EXPECT_THAT(DecodeError(raw.substr(0, 7), kPcm16k).ToString(), HasSubstr("multiple of 2"));
  EXPECT_THAT(DecodeError(raw.substr(0, 6), {AudioEncoding::kLinearPcm, 16000, 2}).ToString(),
              HasSubstr("multiple of 4"));
  EXPECT_THAT(DecodeError("abc", {AudioEncoding::kMulaw, 8000, 2}).ToString(), HasSubstr("multiple of 2"));
  EXPECT_THAT(DecodeAudio(raw, kPcm16k, 0, 60).status().ToString(), HasSubstr("target"));
}

TEST(DecodeAudioTest, CorruptTruncatedAndEmptyFilesAreRefused) {
  const std::string wav = Encode(ToPcm16(Sine(440, 16000, 1.0)), 16000, 1, kWav16);
  const absl::Status cut_header = DecodeError(wav.substr(0, 20), kPcm16k);
  EXPECT_EQ(cut_header.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut_header.ToString(), AllOf(HasSubstr("wav"), HasSubstr("truncated")));
  // Cut inside the samples: the RIFF size says how long the file was (libsndfile alone would read it shorter).
  EXPECT_THAT(DecodeError(wav.substr(0, wav.size() / 2), kPcm16k).ToString(),
              AllOf(HasSubstr("truncated wav"), HasSubstr("declares 32044 bytes")));
  const std::string flac = Encode(ToPcm16(Sine(440, 16000, 1.0)), 16000, 1, SF_FORMAT_FLAC | SF_FORMAT_PCM_16);
  EXPECT_THAT(DecodeError(flac.substr(0, flac.size() / 2), kPcm16k).ToString(), HasSubstr("truncated"));
  std::string garbled = flac;
  for (size_t i = 200; i < garbled.size(); i += 3) garbled[i] = static_cast<char>(garbled[i] * 7 + 1);
  EXPECT_EQ(DecodeError(garbled, kPcm16k).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(DecodeError("fLaC-but-nothing-else", kPcm16k).ToString(), HasSubstr("flac"));

  EXPECT_THAT(DecodeError("", kPcm16k).ToString(), HasSubstr("empty"));
  EXPECT_THAT(DecodeError(Encode(std::vector<int16_t>{}, 16000, 1, kWav16), kPcm16k).ToString(), HasSubstr("empty"));
  EXPECT_THAT(DecodeError(Encode(std::vector<int16_t>(40 * 10), 16000, 40, kWav16), kPcm16k).ToString(),
              AllOf(HasSubstr("channel count is 40"), HasSubstr("wav")));
}

// Regression (fuzz_audio_decode): an IEEE-float WAV may hold NaN, infinities and huge values. Each sample is
// clamped to [-1, 1] (NaN to 0) before channels mix and before resampling; a NaN once came out as NaN, and through
// the resampler it turned the whole neighbourhood into NaN.
TEST(DecodeAudioTest, NonFiniteAndHugeFloatSamplesAreClampedBeforeMixingAndResampling) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const std::vector<float> odd = {kNan, kInf, -kInf, 1e30f, -1e30f, 0.25f, 1.5f};
  constexpr int kWavFloat = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  absl::StatusOr<DecodedAudio> audio = DecodeAudio(Encode(odd, 16000, 1, kWavFloat), kPcm16k, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_THAT(audio->samples, ::testing::ElementsAre(0.0f, 1.0f, -1.0f, 1.0f, -1.0f, 0.25f, 1.0f));
  // Stereo: infinities of opposite signs in one frame would mix to NaN (inf - inf) unclamped.
  const std::vector<float> stereo = {kInf, -kInf, 1e38f, 1e38f, kNan, 0.5f};
  audio = DecodeAudio(Encode(stereo, 16000, 2, kWavFloat), kPcm16k, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  EXPECT_THAT(audio->samples, ::testing::ElementsAre(0.0f, 1.0f, 0.25f));
  // Resampled: every output sample is finite and within [-1, 1].
  std::vector<float> sine = Sine(440, 8000, 0.1);
  sine[100] = kNan;
  sine[200] = kInf;
  sine[300] = -1e30f;
  audio = DecodeAudio(Encode(sine, 8000, 1, kWavFloat), kPcm16k, 16000, 60);
  ASSERT_TRUE(audio.ok()) << audio.status();
  ASSERT_NEAR(static_cast<double>(audio->samples.size()), 1600, 2);
  for (size_t i = 0; i < audio->samples.size(); ++i) {
    ASSERT_TRUE(std::isfinite(audio->samples[i]) && std::abs(audio->samples[i]) <= 1.0f) << i << ": "
                                                                                        << audio->samples[i];
  }
}

// Regression (fuzz_audio_decode): a few samples at a much higher rate resample to none at the target rate. That
// was returned as OK with no samples (OfflineRecognition then planned no window and never answered); it is
// refused as empty audio, as input with no samples at all is.
TEST(DecodeAudioTest, AudioThatResamplesToNoSampleIsRefusedAsEmpty) {
  const std::string two = RawPcm16({10000, 10000});
  const absl::Status none = DecodeError(two, {AudioEncoding::kLinearPcm, 48000, 1});
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(none.ToString(), AllOf(HasSubstr("empty audio"), HasSubstr("2 sample(s) at 48000 Hz"),
                                     HasSubstr("no sample at 16000 Hz")));
  EXPECT_THAT(DecodeError(RawPcm16(std::vector<int16_t>(40, 1000)), {AudioEncoding::kLinearPcm, 768000, 1})
                  .ToString(),
              HasSubstr("empty audio"));
  absl::StatusOr<DecodedAudio> one = DecodeAudio(RawPcm16({10000, 10000, 10000}), {AudioEncoding::kLinearPcm, 48000, 1},
                                                 16000, 60);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->samples.size(), 1u);
}

TEST(DecodeAudioTest, AudioLongerThanMaxSecondsIsRefusedFromItsHeader) {
  // The FLAC header's frame count gives the exact duration before anything is decoded.
  const std::string flac = Encode(ToPcm16(Sine(440, 16000, 3.0)), 16000, 1, SF_FORMAT_FLAC | SF_FORMAT_PCM_16);
  EXPECT_THAT(DecodeError(flac, kPcm16k, 1.0).ToString(), AllOf(HasSubstr("lasts 3 s"), HasSubstr("limit of 1 s")));
  EXPECT_TRUE(DecodeAudio(flac, kPcm16k, 16000, 3.0).ok());
  // Raw audio: from the byte count (an hour of 8 kHz PCM16 refused without decoding a sample).
  const std::string hour(8000 * 2 * 3600, '\0');
  EXPECT_THAT(DecodeError(hour, {AudioEncoding::kLinearPcm, 8000, 1}, 30).ToString(),
              AllOf(HasSubstr("lasts 3600 s"), HasSubstr("limit of 30 s")));
  EXPECT_THAT(DecodeError("ab", kPcm16k, 0).ToString(), HasSubstr("max_seconds"));
}

// The header fields at fixed places in a WAV (fmt chunk) and FLAC (STREAMINFO) file, patched after writing.
void PutLe32(std::string& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

TEST(DecodeAudioTest, AHeaderRateOrChannelCountOfZeroIsNamedNotAnInternalError) {
  std::string wav = Encode(ToPcm16(Sine(440, 16000, 0.1)), 16000, 1, kWav16);
  ASSERT_EQ(wav.substr(12, 4), "fmt ");
  PutLe32(wav, 24, 0);  // the fmt chunk's sample rate (libsndfile alone says "Internal error")
  absl::Status s = DecodeError(wav, kPcm16k);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.ToString(), AllOf(HasSubstr("wav header's sample rate is 0 Hz"), Not(HasSubstr("Internal"))));
  EXPECT_EQ(ProbeAudio(wav, kPcm16k, 60).status(), s);
  std::string mono = Encode(ToPcm16(Sine(440, 16000, 0.1)), 16000, 1, kWav16);
  mono[22] = mono[23] = 0;  // channels
  EXPECT_THAT(DecodeError(mono, kPcm16k).ToString(), HasSubstr("wav header's channel count is 0"));
  std::string flac = Encode(ToPcm16(Sine(440, 16000, 0.1)), 16000, 1, SF_FORMAT_FLAC | SF_FORMAT_PCM_16);
  flac[18] = flac[19] = 0;
  flac[20] = static_cast<char>(flac[20] & 0x0F);  // the 20-bit STREAMINFO rate
  EXPECT_THAT(DecodeError(flac, kPcm16k).ToString(), HasSubstr("flac header's sample rate is 0 Hz"));
}

TEST(ProbeAudioTest, ReadsTheExtentFromTheHeaderOrByteCountWithTheSameRefusalsAsDecoding) {
  const std::string wav = Encode(ToPcm16(Sine(440, 8000, 2.0)), 8000, 2, kWav16);
  absl::StatusOr<AudioExtent> extent = ProbeAudio(wav, kPcm16k, 60);
  ASSERT_TRUE(extent.ok()) << extent.status();
  EXPECT_EQ(extent->format, "wav");
  EXPECT_EQ(extent->source_rate_hz, 8000);
  EXPECT_EQ(extent->source_channels, 2);
  EXPECT_EQ(extent->frames, 8000);
  // 8000 mono source floats + 16000 (+1024 slack) resampled ones.
  EXPECT_EQ(DecodePeakBytes(*extent, 16000, 60), (8000 + 16000 + 1024) * 4);

  extent = ProbeAudio(std::string(3000, '\x7f'), {AudioEncoding::kMulaw, 1000, 1}, 60);
  ASSERT_TRUE(extent.ok()) << extent.status();
  EXPECT_EQ(extent->format, "raw-mulaw");
  EXPECT_EQ(extent->frames, 3000);
  EXPECT_EQ(DecodePeakBytes(*extent, 1000, 60), 3000 * 4);  // no resampling

  // The refusals DecodeAudio makes before decoding, with its messages: 50 MB of 1 kHz mu-law is 50000 s.
  const std::string huge(50'000'000, '\x7f');
  const absl::Status too_long = ProbeAudio(huge, {AudioEncoding::kMulaw, 1000, 1}, 3600).status();
  EXPECT_THAT(too_long.ToString(), AllOf(HasSubstr("lasts 50000 s"), HasSubstr("limit of 3600 s"),
                                         HasSubstr("max_audio_seconds")));
  EXPECT_EQ(DecodeAudio(huge, {AudioEncoding::kMulaw, 1000, 1}, 16000, 3600).status(), too_long);
  const std::string flac = Encode(ToPcm16(Sine(440, 16000, 3.0)), 16000, 1, SF_FORMAT_FLAC | SF_FORMAT_PCM_16);
  EXPECT_EQ(ProbeAudio(flac, kPcm16k, 1.0).status(), DecodeError(flac, kPcm16k, 1.0));
  EXPECT_EQ(ProbeAudio("abc", kPcm16k, 60).status(), DecodeError("abc", kPcm16k));
  EXPECT_EQ(ProbeAudio("", kPcm16k, 60).status(), DecodeError("", kPcm16k));
  // No frame count in the header: max_seconds' worth is assumed.
  EXPECT_EQ(DecodePeakBytes(AudioExtent{.format = "wav", .source_rate_hz = 16000, .source_channels = 1, .frames = -1}, 16000, 10),
            16000 * 10 * 4);
}

}  // namespace
}  // namespace sluice::voice
