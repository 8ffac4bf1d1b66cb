// --api openai-audio's request body (loadtest/speech/openai_audio_client.h) read back by the server's own parsers
// (server/http/multipart_form.h, server/voice/transcription_form.h), and its answer decoding.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadtest/speech/openai_audio_client.h"
#include "server/http/multipart_form.h"
#include "server/voice/transcription_form.h"

namespace sluice::loadtest {
namespace {

void ExpectServerReads(const TranscriptionForm& form, const std::string& wav) {
  absl::StatusOr<std::string> boundary = MultipartBoundary(form.content_type);
  ASSERT_TRUE(boundary.ok()) << boundary.status();
  absl::StatusOr<MultipartForm> parts = ParseMultipartForm(form.body, *boundary);
  ASSERT_TRUE(parts.ok()) << parts.status();
  absl::StatusOr<voice::TranscriptionRequest> request = voice::DecodeTranscriptionForm(*parts);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->model, "asr_digits");
  EXPECT_EQ(request->audio, wav);
  EXPECT_EQ(request->format, voice::TranscriptFormat::kJson);
}

TEST(OpenAiAudioFormTest, TheServerReadsTheModelTheFormatAndTheExactBytes) {
  const std::string wav("RIFF\0\0\0\0WAVE\r\n--\r\n\xff", 19);
  ExpectServerReads(EncodeTranscriptionForm("asr_digits", wav), wav);
}

TEST(OpenAiAudioFormTest, ABoundaryFoundInTheAudioIsLengthened) {
  const std::string wav = "RIFF....WAVE\r\n--sluice-loadtest-7f3a9c--\r\n";
  const TranscriptionForm form = EncodeTranscriptionForm("asr_digits", wav);
  EXPECT_THAT(form.content_type, testing::HasSubstr("boundary=sluice-loadtest-7f3a9cx"));
  ExpectServerReads(form, wav);
}

TEST(OpenAiAudioFormTest, DecodesTheTextOrSaysWhatIsWrong) {
  EXPECT_EQ(*DecodeTranscriptionText(R"({"text":"one two"})"), "one two");
  EXPECT_TRUE(absl::IsDataLoss(DecodeTranscriptionText("one two").status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeTranscriptionText(R"({"txt":"x"})").status()));
  EXPECT_TRUE(absl::IsDataLoss(DecodeTranscriptionText(R"({"text":3})").status()));
}

}  // namespace
}  // namespace sluice::loadtest
