// StreamingAudioDecoder: the same bytes cut into chunks of irregular sizes (1 byte, odd splits inside samples and
// frames, a WAV header split anywhere) decode to what DecodeAudio makes of them whole; equal rates pass through
// exactly; a WAV header's format wins; bad declarations, headers and trailing bytes are refused.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/voice/audio_decode.h"
#include "tests/voice/audio_test_files.h"

namespace sluice::voice {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::Encode;
using testing::MaxAbsDiff;
using testing::RawPcm16;
using testing::Sine;
using testing::ToPcm16;

constexpr int kWav16 = SF_FORMAT_WAV | SF_FORMAT_PCM_16;

struct Streamed {
  std::vector<float> samples;
  int64_t input_frames = 0;
  int source_rate_hz = 0;
};

// Feeds `bytes` in chunks cycling through `sizes`, then finishes.
Streamed Stream(std::string_view bytes, const DeclaredAudio& declared, int target_rate_hz,
                const std::vector<size_t>& sizes) {
  Streamed result;
  absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> decoder =
      StreamingAudioDecoder::Create(declared, target_rate_hz);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  if (!decoder.ok()) return result;
  for (size_t pos = 0, i = 0; pos < bytes.size(); pos += sizes[i++ % sizes.size()]) {
    const absl::Status s = (*decoder)->Append(bytes.substr(pos, sizes[i % sizes.size()]), &result.samples);
    EXPECT_TRUE(s.ok()) << s;
  }
  const absl::Status s = (*decoder)->Finish(&result.samples);
  EXPECT_TRUE(s.ok()) << s;
  result.input_frames = (*decoder)->input_frames();
  result.source_rate_hz = (*decoder)->source_rate_hz();
  return result;
}

const std::vector<size_t> kIrregular = {1, 3, 800, 7, 1601, 2, 4410, 5, 12799};

// Streams `bytes` in irregular chunks and one byte at a time; both must match one-shot decoding.
void ExpectStreamMatchesOneShot(std::string_view bytes, const DeclaredAudio& declared, int target_rate_hz,
                                int64_t source_frames) {
  absl::StatusOr<DecodedAudio> whole = DecodeAudio(bytes, declared, target_rate_hz, 600);
  ASSERT_TRUE(whole.ok()) << whole.status();
  for (const std::vector<size_t>& sizes : {kIrregular, std::vector<size_t>{1}}) {
    SCOPED_TRACE(sizes.size() == 1 ? "1-byte chunks" : "irregular chunks");
    const Streamed streamed = Stream(bytes, declared, target_rate_hz, sizes);
    EXPECT_EQ(streamed.input_frames, source_frames);
    EXPECT_EQ(streamed.source_rate_hz, whole->source_rate_hz);
    EXPECT_NEAR(static_cast<double>(streamed.samples.size()), static_cast<double>(whole->samples.size()), 3);
    EXPECT_LT(MaxAbsDiff(streamed.samples, whole->samples), 1e-3);
  }
}

TEST(StreamingAudioDecoderTest, EqualRatesPassThroughExactly) {
  const std::vector<int16_t> x = ToPcm16(Sine(440, 16000, 0.5));
  const Streamed streamed = Stream(RawPcm16(x), {AudioEncoding::kLinearPcm, 16000, 1}, 16000, kIrregular);
  ASSERT_EQ(streamed.samples.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(streamed.samples[i], x[i] / 32768.0f) << i;
}

class StreamResampleTest : public ::testing::TestWithParam<int> {};

TEST_P(StreamResampleTest, RawPcm16ChunksMatchOneShotResampling) {
  const int rate = GetParam();
  ExpectStreamMatchesOneShot(RawPcm16(ToPcm16(Sine(440, rate, 1.0))), {AudioEncoding::kLinearPcm, rate, 1}, 16000,
                             rate);
}

INSTANTIATE_TEST_SUITE_P(Rates, StreamResampleTest, ::testing::Values(8000, 44100, 48000));

TEST(StreamingAudioDecoderTest, StereoFramesSplitAnywhereMatchOneShot) {
  std::vector<int16_t> interleaved;
  for (int16_t v : ToPcm16(Sine(440, 8000, 0.5))) interleaved.insert(interleaved.end(), {v, int16_t(-v / 2)});
  ExpectStreamMatchesOneShot(RawPcm16(interleaved), {AudioEncoding::kLinearPcm, 8000, 2}, 16000, 4000);
}

TEST(StreamingAudioDecoderTest, RawMulawAndAlawMatchOneShot) {
  for (auto [encoding, subtype] : {std::pair{AudioEncoding::kMulaw, SF_FORMAT_ULAW},
                                   std::pair{AudioEncoding::kAlaw, SF_FORMAT_ALAW}}) {
    const std::string g711 = Encode(ToPcm16(Sine(440, 8000, 0.5)), 8000, 1, SF_FORMAT_RAW | subtype);
    ExpectStreamMatchesOneShot(g711, {encoding, 8000, 1}, 8000, 4000);   // pass-through
    ExpectStreamMatchesOneShot(g711, {encoding, 8000, 1}, 16000, 4000);  // resampled
  }
}

TEST(StreamingAudioDecoderTest, WavHeaderSplitAcrossChunksIsParsedAndItsFormatWins) {
  const std::string wav = Encode(ToPcm16(Sine(440, 8000, 0.5)), 8000, 1, kWav16);
  ExpectStreamMatchesOneShot(wav, {AudioEncoding::kLinearPcm, 16000, 2}, 16000, 4000);  // declared rate is wrong
  // mu-law WAV: an 18-byte fmt chunk and a fact chunk before the data.
  const std::string mulaw = Encode(ToPcm16(Sine(440, 8000, 0.5)), 8000, 1, SF_FORMAT_WAV | SF_FORMAT_ULAW);
  ExpectStreamMatchesOneShot(mulaw, {AudioEncoding::kLinearPcm, 16000, 1}, 16000, 4000);
  // Stereo WAV at 44.1 kHz.
  std::vector<int16_t> stereo;
  for (int16_t v : ToPcm16(Sine(440, 44100, 0.5))) stereo.insert(stereo.end(), {v, 0});
  ExpectStreamMatchesOneShot(Encode(stereo, 44100, 2, kWav16), {AudioEncoding::kMulaw, 8000, 1}, 16000, 22050);
}

TEST(StreamingAudioDecoderTest, ChunksAfterTheWavDataChunkAreIgnored) {
  std::string wav = Encode(ToPcm16(Sine(440, 16000, 0.25)), 16000, 1, kWav16);
  wav += std::string("LIST\x05\0\0\0abcde\0", 14);  // odd-sized trailing chunk, padded
  ExpectStreamMatchesOneShot(wav, {AudioEncoding::kLinearPcm, 16000, 1}, 16000, 4000);
}

TEST(StreamingAudioDecoderTest, ShortRawStreamThatBeginsLikeRiffIsRaw) {
  const Streamed streamed = Stream("RIFX", {AudioEncoding::kLinearPcm, 16000, 1}, 16000, {1});
  EXPECT_EQ(streamed.input_frames, 2);
  const Streamed riff = Stream("RI", {AudioEncoding::kLinearPcm, 16000, 1}, 16000, {1});
  EXPECT_EQ(riff.input_frames, 1);  // ended before 12 bytes: raw after all
}

TEST(StreamingAudioDecoderTest, CreateRefusesNonRawEncodingsAndBadParameters) {
  for (AudioEncoding e : {AudioEncoding::kUnspecified, AudioEncoding::kFlac, AudioEncoding::kOggOpus}) {
    const absl::Status s = StreamingAudioDecoder::Create({e, 16000, 1}, 16000).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.ToString(), HasSubstr("unsupported encoding"));
  }
  EXPECT_THAT(StreamingAudioDecoder::Create({AudioEncoding::kLinearPcm, 0, 1}, 16000).status().ToString(),
              HasSubstr("sample rate"));
  EXPECT_THAT(StreamingAudioDecoder::Create({AudioEncoding::kMulaw, 8000, 0}, 16000).status().ToString(),
              HasSubstr("channel"));
  EXPECT_THAT(StreamingAudioDecoder::Create({AudioEncoding::kMulaw, 8000, 1}, -1).status().ToString(),
              HasSubstr("target"));
}

// Appends `chunks` then finishes, returning the first error.
absl::Status StreamError(const std::vector<std::string>& chunks, const DeclaredAudio& declared) {
  absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> decoder = StreamingAudioDecoder::Create(declared, 16000);
  if (!decoder.ok()) return decoder.status();
  std::vector<float> out;
  for (const std::string& chunk : chunks) {
    if (absl::Status s = (*decoder)->Append(chunk, &out); !s.ok()) return s;
  }
  return (*decoder)->Finish(&out);
}

TEST(StreamingAudioDecoderTest, TrailingPartialFramesAndBrokenHeadersAreErrors) {
  const DeclaredAudio pcm = {AudioEncoding::kLinearPcm, 8000, 1};
  const absl::Status odd = StreamError({"ab", "c"}, pcm);
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(odd.ToString(), HasSubstr("1 trailing byte"));
  EXPECT_THAT(StreamError({"abc"}, {AudioEncoding::kMulaw, 8000, 2}).ToString(), HasSubstr("trailing"));

  const std::string wav = Encode(ToPcm16(Sine(440, 8000, 0.1)), 8000, 1, kWav16);
  EXPECT_THAT(StreamError({wav.substr(0, 30)}, pcm).ToString(), HasSubstr("inside its WAV header"));
  const std::string riff = std::string("RIFF\0\0\0\0WAVE", 12);
  EXPECT_THAT(StreamError({riff + std::string("LIST\0\0\x10\0", 8)}, pcm).ToString(), HasSubstr("too large"));
  EXPECT_THAT(StreamError({riff, std::string(70000, 'x')}, pcm).ToString(), HasSubstr("too large"));
  const std::string float_wav = Encode(Sine(440, 8000, 0.1), 8000, 1, SF_FORMAT_WAV | SF_FORMAT_FLOAT);
  EXPECT_THAT(StreamError({float_wav}, pcm).ToString(), HasSubstr("unsupported WAV format"));
  EXPECT_THAT(StreamError({riff + std::string("data\0\0\0\0", 8)}, pcm).ToString(), HasSubstr("before a fmt"));
}

TEST(StreamingAudioDecoderTest, NothingIsAcceptedAfterFinish) {
  absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> decoder =
      StreamingAudioDecoder::Create({AudioEncoding::kLinearPcm, 8000, 1}, 16000);
  ASSERT_TRUE(decoder.ok());
  std::vector<float> out;
  ASSERT_TRUE((*decoder)->Finish(&out).ok());
  EXPECT_TRUE(out.empty());
  EXPECT_EQ((*decoder)->Append("ab", &out).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*decoder)->Finish(&out).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(StreamingAudioDecoderTest, AChunkPastMaxSecondsIsRefusedFromItsByteCountBeforeDecoding) {
  const DeclaredAudio mulaw_1k{AudioEncoding::kMulaw, 1000, 1};
  absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> decoder =
      StreamingAudioDecoder::Create(mulaw_1k, 16000, /*max_seconds=*/10);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  // Raw from its first bytes: refused before the first Append too.
  EXPECT_THAT((*decoder)->CheckRoomFor(std::string(11000, '\x7f')).status().ToString(), HasSubstr("lasts 11 s"));
  std::vector<float> out;
  // 6 s, then 4 s: exactly the limit.
  ASSERT_TRUE((*decoder)->Append(std::string(6000, '\x7f'), &out).ok());
  absl::StatusOr<int64_t> room = (*decoder)->CheckRoomFor(std::string(4000, '\x7f'));
  ASSERT_TRUE(room.ok()) << room.status();
  EXPECT_EQ(*room, (4000 + 64000 + 1024) * 4);  // source floats + resampled ones
  ASSERT_TRUE((*decoder)->Append(std::string(4000, '\x7f'), &out).ok());
  const size_t before = out.size();
  // One more byte is refused: by CheckRoomFor without decoding, and by Append before decoding any of it.
  const absl::Status refused = (*decoder)->CheckRoomFor("\x7f").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.ToString(), AllOf(HasSubstr("limit of 10 s"), HasSubstr("max_audio_seconds")));
  const std::string huge(50'000'000, '\x7f');  // 50000 s at 1 kHz
  EXPECT_THAT((*decoder)->CheckRoomFor(huge).status().ToString(), HasSubstr("lasts 50010 s"));
  const absl::Status appended = (*decoder)->Append(huge, &out);
  EXPECT_EQ(appended.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(appended.ToString(), HasSubstr("limit of 10 s"));
  EXPECT_EQ(out.size(), before);  // nothing of it was decoded
  EXPECT_EQ((*decoder)->input_frames(), 10000);
}

TEST(StreamingAudioDecoderTest, AWavStreamIsBoundedByItsHeadersRate) {
  // The header says 8 kHz (declared 16 kHz): 2 s of PCM16 is 32000 bytes at the header's rate.
  const std::string wav = Encode(ToPcm16(Sine(440, 8000, 3.0)), 8000, 1, kWav16);
  absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> decoder =
      StreamingAudioDecoder::Create({AudioEncoding::kLinearPcm, 16000, 1}, 16000, /*max_seconds=*/2);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  std::vector<float> out;
  const absl::Status s = (*decoder)->Append(wav, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.ToString(), AllOf(HasSubstr("lasts 3 s"), HasSubstr("limit of 2 s")));
  EXPECT_TRUE(out.empty());
  EXPECT_FALSE(StreamingAudioDecoder::Create({AudioEncoding::kLinearPcm, 16000, 1}, 16000, 0).ok());
  // While the header is awaited the format may change: the estimate assumes 1 kHz and one byte per frame.
  absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> fresh =
      StreamingAudioDecoder::Create({AudioEncoding::kLinearPcm, 16000, 1}, 16000, 3600);
  ASSERT_TRUE(fresh.ok());
  absl::StatusOr<int64_t> room = (*fresh)->CheckRoomFor(wav.substr(0, 1000));
  ASSERT_TRUE(room.ok()) << room.status();
  EXPECT_EQ(*room, (1000 + 16000 + 1024) * 4);
}

}  // namespace
}  // namespace sluice::voice
