// OpenAI /v1/audio/transcriptions' wire format: the form's fields (transcription_form.h) and the answer in every
// response_format (transcription_format.h).
#include <string>
#include <vector>

#include <rapidjson/document.h>

#include "backend/base/status_mapping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/voice/transcription_form.h"
#include "server/voice/transcription_format.h"

namespace sluice::voice {
namespace {

using ::testing::HasSubstr;

MultipartPart Field(std::string name, std::string_view value) {
  MultipartPart part;
  part.name = std::move(name);
  part.data = value;
  return part;
}

MultipartForm FormWith(std::vector<MultipartPart> extra) {
  MultipartForm form;
  MultipartPart file = Field("file", "RIFF....WAVE");
  file.filename = "clip.wav";
  form.parts.push_back(file);
  for (MultipartPart& part : extra) form.parts.push_back(std::move(part));
  return form;
}

TEST(TranscriptionFormTest, DecodesEveryField) {
  absl::StatusOr<TranscriptionRequest> r = DecodeTranscriptionForm(FormWith({
      Field("model", "asr_digits"), Field("language", "en-US"), Field("prompt", "digits: "),
      Field("response_format", "verbose_json"), Field("temperature", "0.25"),
      Field("timestamp_granularities[]", "word"), Field("timestamp_granularities[]", "segment"),
      Field("stream", "false")}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "asr_digits");
  EXPECT_EQ(r->audio, "RIFF....WAVE");
  EXPECT_EQ(r->filename, "clip.wav");
  EXPECT_EQ(r->options.language, "en-US");
  EXPECT_EQ(r->options.prompt, "digits: ");
  EXPECT_FLOAT_EQ(r->options.temperature, 0.25f);
  EXPECT_EQ(r->format, TranscriptFormat::kVerboseJson);
  EXPECT_TRUE(r->word_timestamps);
  EXPECT_TRUE(r->segment_timestamps);
}

TEST(TranscriptionFormTest, DefaultsAreJsonTheDefaultModelAndGreedy) {
  absl::StatusOr<TranscriptionRequest> r = DecodeTranscriptionForm(FormWith({}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "");
  EXPECT_EQ(r->format, TranscriptFormat::kJson);
  EXPECT_EQ(r->options.temperature, 0);
  EXPECT_FALSE(r->word_timestamps);
  EXPECT_FALSE(r->segment_timestamps);
  // verbose_json without granularities: segments, as OpenAI's default; word alone: no segments.
  r = DecodeTranscriptionForm(FormWith({Field("response_format", "verbose_json")}));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->segment_timestamps);
  EXPECT_FALSE(r->word_timestamps);
  r = DecodeTranscriptionForm(
      FormWith({Field("response_format", "verbose_json"), Field("timestamp_granularities[]", "word")}));
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->segment_timestamps);
  EXPECT_TRUE(r->word_timestamps);
}

TEST(TranscriptionFormTest, RefusesEachBadFieldByName) {
  struct Case {
    MultipartForm form;
    std::string param;
    std::string message;
  };
  const std::string long_prompt(kMaxTranscriptionPromptBytes + 1, 'p');
  std::vector<Case> cases = {
      {MultipartForm{{Field("model", "m")}}, "file", "no 'file' field"},
      {MultipartForm{{Field("file", "")}}, "file", "'file' is empty"},
      {FormWith({Field("file", "x")}), "file", "more than once"},
      {FormWith({Field("model", "a"), Field("model", "b")}), "model", "more than once"},
      {FormWith({Field("response_format", "diarized_json")}), "response_format", "'diarized_json' is not supported"},
      {FormWith({Field("temperature", "hot")}), "temperature", "must be a number"},
      {FormWith({Field("temperature", "1.5")}), "temperature", "outside [0, 1]"},
      {FormWith({Field("temperature", "nan")}), "temperature", "must be a number"},
      {FormWith({Field("language", "e n")}), "language", "not an ISO-639-1"},
      {FormWith({Field("prompt", long_prompt)}), "prompt", "at most 8192"},
      {FormWith({Field("timestamp_granularities[]", "sentence")}), "timestamp_granularities[]", "'sentence'"},
      {FormWith({Field("timestamp_granularities[]", "word")}), "timestamp_granularities[]",
       "needs response_format verbose_json, not json"},
      {FormWith({Field("stream", "true")}), "stream", "'stream' is not supported"},
      {FormWith({Field("chunking_strategy", "auto")}), "chunking_strategy", "unknown field 'chunking_strategy'"},
      {FormWith({Field("model", std::string(300, 'm'))}), "model", "longer than 256 bytes"},
  };
  absl::StatusOr<TranscriptionRequest> unnamed = DecodeTranscriptionForm(FormWith({Field("", "x")}));
  EXPECT_THAT(unnamed.status().message(), HasSubstr("empty name"));
  for (Case& c : cases) {
    absl::StatusOr<TranscriptionRequest> r = DecodeTranscriptionForm(c.form);
    ASSERT_FALSE(r.ok()) << c.message;
    EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
    EXPECT_EQ(RequestField(r.status()), c.param) << r.status();
    EXPECT_THAT(r.status().message(), HasSubstr(c.message));
  }
}

Recognition TwoSegments() {
  Recognition r;
  r.transcript.text = "one two three";
  r.transcript.words = {{"one", 100, 400, 0.9f}, {"two", 500, 900, 0.8f}, {"three", 3723004, 3723450, 0.7f}};
  r.word_times = true;
  r.segments = {{.start_ms = 0, .end_ms = 1000, .text = " one two"},
                {.start_ms = 3723004, .end_ms = 3723456, .text = "three"}};
  r.language = "en";
  r.audio_seconds = 3724.5;
  return r;
}

TranscriptionRequest Asking(TranscriptFormat format, bool words = false, bool segments = false) {
  TranscriptionRequest request;
  request.format = format;
  request.word_timestamps = words;
  request.segment_timestamps = segments;
  return request;
}

rapidjson::Document Json(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.data(), body.size());
  EXPECT_FALSE(doc.HasParseError()) << body;
  return doc;
}

TEST(TranscriptionFormatTest, Timestamps) {
  EXPECT_EQ(SrtTimestamp(0), "00:00:00,000");
  EXPECT_EQ(SrtTimestamp(3723004), "01:02:03,004");
  EXPECT_EQ(VttTimestamp(3723004), "01:02:03.004");
  EXPECT_EQ(VttTimestamp(59999), "00:00:59.999");
  EXPECT_EQ(SrtTimestamp(-5), "00:00:00,000");
  EXPECT_EQ(SrtTimestamp(int64_t{100} * 3600000), "100:00:00,000");
}

TEST(TranscriptionFormatTest, JsonAndText) {
  TranscriptionBody json = FormatTranscription(TwoSegments(), Asking(TranscriptFormat::kJson));
  EXPECT_EQ(json.content_type, "application/json");
  EXPECT_EQ(json.body, R"({"text":"one two three"})");
  TranscriptionBody text = FormatTranscription(TwoSegments(), Asking(TranscriptFormat::kText));
  EXPECT_THAT(text.content_type, HasSubstr("text/plain"));
  EXPECT_EQ(text.body, "one two three\n");
}

TEST(TranscriptionFormatTest, VerboseJsonHasSegmentsAndWordsAsAsked) {
  TranscriptionBody body = FormatTranscription(TwoSegments(), Asking(TranscriptFormat::kVerboseJson, true, true));
  rapidjson::Document doc = Json(body.body);
  EXPECT_STREQ(doc["task"].GetString(), "transcribe");
  EXPECT_STREQ(doc["language"].GetString(), "en");
  EXPECT_DOUBLE_EQ(doc["duration"].GetDouble(), 3724.5);
  EXPECT_STREQ(doc["text"].GetString(), "one two three");
  ASSERT_EQ(doc["segments"].Size(), 2u);
  EXPECT_EQ(doc["segments"][1]["id"].GetInt(), 1);
  EXPECT_DOUBLE_EQ(doc["segments"][1]["start"].GetDouble(), 3723.004);
  EXPECT_DOUBLE_EQ(doc["segments"][1]["end"].GetDouble(), 3723.456);
  EXPECT_STREQ(doc["segments"][0]["text"].GetString(), " one two");
  ASSERT_EQ(doc["words"].Size(), 3u);
  EXPECT_STREQ(doc["words"][1]["word"].GetString(), "two");
  EXPECT_DOUBLE_EQ(doc["words"][1]["start"].GetDouble(), 0.5);
  EXPECT_DOUBLE_EQ(doc["words"][1]["end"].GetDouble(), 0.9);

  doc = Json(FormatTranscription(TwoSegments(), Asking(TranscriptFormat::kVerboseJson, false, true)).body);
  EXPECT_TRUE(doc.HasMember("segments"));
  EXPECT_FALSE(doc.HasMember("words"));
  doc = Json(FormatTranscription(TwoSegments(), Asking(TranscriptFormat::kVerboseJson, true, false)).body);
  EXPECT_FALSE(doc.HasMember("segments"));
  EXPECT_TRUE(doc.HasMember("words"));
}

TEST(TranscriptionFormatTest, VerboseJsonLanguageFallsBackToTheRequestedOne) {
  Recognition r = TwoSegments();
  r.language = "";
  TranscriptionRequest request = Asking(TranscriptFormat::kVerboseJson, false, true);
  request.options.language = "en";
  EXPECT_STREQ(Json(FormatTranscription(r, request).body)["language"].GetString(), "en");
}

TEST(TranscriptionFormatTest, SrtAndVttCuesFromSegments) {
  EXPECT_EQ(FormatTranscription(TwoSegments(), Asking(TranscriptFormat::kSrt)).body,
            "1\n00:00:00,000 --> 00:00:01,000\none two\n\n2\n01:02:03,004 --> 01:02:03,456\nthree\n\n");
  TranscriptionBody vtt = FormatTranscription(TwoSegments(), Asking(TranscriptFormat::kVtt));
  EXPECT_THAT(vtt.content_type, HasSubstr("text/vtt"));
  EXPECT_EQ(vtt.body, "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\none two\n\n01:02:03.004 --> 01:02:03.456\nthree\n\n");
}

TEST(TranscriptionFormatTest, EmptyTranscriptAndTextWithoutSegments) {
  Recognition empty;
  empty.audio_seconds = 1.5;
  EXPECT_EQ(FormatTranscription(empty, Asking(TranscriptFormat::kSrt)).body, "");
  EXPECT_EQ(FormatTranscription(empty, Asking(TranscriptFormat::kVtt)).body, "WEBVTT\n\n");
  EXPECT_EQ(FormatTranscription(empty, Asking(TranscriptFormat::kJson)).body, R"({"text":""})");
  Recognition unsegmented;
  unsegmented.transcript.text = "five\nsix";
  unsegmented.audio_seconds = 2.25;
  EXPECT_EQ(FormatTranscription(unsegmented, Asking(TranscriptFormat::kSrt)).body,
            "1\n00:00:00,000 --> 00:00:02,250\nfive six\n\n");
  // A blank segment makes no cue (its empty line would end the cue early), and numbering stays consecutive.
  Recognition blank = TwoSegments();
  blank.segments.insert(blank.segments.begin(), {.start_ms = 0, .end_ms = 10, .text = " \n "});
  EXPECT_EQ(FormatTranscription(blank, Asking(TranscriptFormat::kSrt)).body,
            "1\n00:00:00,000 --> 00:00:01,000\none two\n\n2\n01:02:03,004 --> 01:02:03,456\nthree\n\n");
}

TEST(TranscriptionFormatTest, WordTimesAskedOfARecognizerWithoutThemAreRefusedByName) {
  Recognition segments_only = TwoSegments();
  segments_only.word_times = false;
  const TranscriptionRequest words = Asking(TranscriptFormat::kVerboseJson, true, false);
  absl::Status refused = CheckAnswerable(segments_only, words, "whisper_base");
  EXPECT_TRUE(absl::IsInvalidArgument(refused)) << refused;
  EXPECT_EQ(RequestField(refused), "timestamp_granularities[]");
  EXPECT_THAT(refused.message(), HasSubstr("model 'whisper_base'"));
  EXPECT_TRUE(CheckAnswerable(segments_only, Asking(TranscriptFormat::kVerboseJson, false, true), "m").ok());
  EXPECT_TRUE(CheckAnswerable(TwoSegments(), words, "m").ok());
}

TEST(TranscriptionFormatTest, InvalidUtf8IsReplacedSoJsonStaysValid) {
  Recognition r;
  r.transcript.text = "ok\xff";
  rapidjson::Document doc;
  const std::string body = FormatTranscription(r, Asking(TranscriptFormat::kJson)).body;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(body.data(), body.size());
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_STREQ(doc["text"].GetString(), "ok\xEF\xBF\xBD");
}

}  // namespace
}  // namespace sluice::voice
