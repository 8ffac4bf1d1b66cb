// Fuzzes OpenAI /v1/audio/transcriptions' request decoding on arbitrary bytes: the input's first line is the
// Content-Type field value, the rest the body. MultipartBoundary (server/http/multipart_form.h) ->
// ParseMultipartForm -> DecodeTranscriptionForm (server/voice/transcription_form.h), then the answer in the decoded
// response_format (server/voice/transcription_format.h) for a recognition made from the decoded fields.
// Asserts beyond "no crash, no ASan/UBSan report":
//   - every refusal is InvalidArgument; the form decoder's names its field (the error's "param"), but for a part
//     with an empty name, which its message says;
//   - every part's data, and the decoded audio, is a view inside the body; no more parts than the limit;
//   - a decoded request has non-empty audio, timestamps only with verbose_json, a temperature in [0, 1];
//   - json and verbose_json answers are one valid-UTF-8 JSON object; srt / vtt cue blocks hold no blank line
//     inside a cue (each block: [number,] timing, one text line).
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "backend/base/status_mapping.h"
#include "rapidjson/document.h"
#include "server/http/multipart_form.h"
#include "server/voice/transcription_form.h"
#include "server/voice/transcription_format.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace sluice;
using namespace sluice::voice;

bool Inside(std::string_view part, std::string_view whole) {
  return part.empty() || (part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size());
}

void CheckAnswer(const TranscriptionRequest& request) {
  // A recognition from the request's own (hostile) text: the prompt as the transcript, one word per byte run.
  Recognition r;
  r.transcript.text = request.options.prompt;
  int64_t t = 0;
  for (absl::string_view word : absl::StrSplit(request.options.prompt, ' ')) {
    r.transcript.words.push_back({std::string(word), t, t + 40, 0.5f});
    t += 50;
  }
  r.word_times = true;
  if (!r.transcript.text.empty()) r.segments.push_back({.start_ms = 0, .end_ms = t, .text = r.transcript.text});
  r.language = request.options.language;
  r.audio_seconds = static_cast<double>(t) / 1000;
  const TranscriptionBody body = FormatTranscription(r, request);
  if (request.format == TranscriptFormat::kJson || request.format == TranscriptFormat::kVerboseJson) {
    rapidjson::Document doc;
    doc.Parse<rapidjson::kParseValidateEncodingFlag>(body.body.data(), body.body.size());
    FUZZ_CHECK(!doc.HasParseError() && doc.IsObject(), "the answer parses back: " + body.body.substr(0, 200));
  } else if (request.format == TranscriptFormat::kSrt || request.format == TranscriptFormat::kVtt) {
    std::string_view cues = body.body;
    if (request.format == TranscriptFormat::kVtt) cues.remove_prefix(std::string_view("WEBVTT\n\n").size());
    for (absl::string_view block : absl::StrSplit(absl::string_view(cues.data(), cues.size()), "\n\n")) {
      if (block.empty()) continue;
      const size_t lines = std::count(block.begin(), block.end(), '\n') + 1;
      FUZZ_CHECK(lines == (request.format == TranscriptFormat::kSrt ? 3u : 2u),
                 "one cue per block: " + std::string(block.substr(0, 200)));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (1u << 20)) return 0;  // the parse is linear; larger inputs only slow the search down
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t eol = input.find('\n');
  if (eol == std::string::npos) return 0;
  const std::string content_type = input.substr(0, eol);
  const std::string body = input.substr(eol + 1);

  absl::StatusOr<std::string> boundary = MultipartBoundary(content_type);
  if (!boundary.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(boundary.status()), boundary.status().ToString());
    return 0;
  }
  MultipartLimits limits;
  limits.max_parts = 8;
  limits.max_part_header_bytes = 512;
  absl::StatusOr<MultipartForm> form = ParseMultipartForm(body, *boundary, limits);
  if (!form.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(form.status()), form.status().ToString());
    return 0;
  }
  FUZZ_CHECK(form->parts.size() <= limits.max_parts, "part count within the limit");
  for (const MultipartPart& part : form->parts) FUZZ_CHECK(Inside(part.data, body), "a part's data inside the body");

  absl::StatusOr<TranscriptionRequest> request = DecodeTranscriptionForm(*form);
  if (!request.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(request.status()), request.status().ToString());
    FUZZ_CHECK(!RequestField(request.status()).empty() ||
                   absl::StrContains(request.status().message(), "empty name"),
               "a refusal names its field: " + request.status().ToString());
    return 0;
  }
  FUZZ_CHECK(!request->audio.empty() && Inside(request->audio, body), "the audio is a view inside the body");
  FUZZ_CHECK(request->format == TranscriptFormat::kVerboseJson ||
                 (!request->word_timestamps && !request->segment_timestamps),
             "timestamps only with verbose_json");
  FUZZ_CHECK(request->options.temperature >= 0 && request->options.temperature <= 1, "temperature in [0, 1]");
  CheckAnswer(*request);
  return 0;
}
