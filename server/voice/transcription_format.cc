#include "server/voice/transcription_format.h"

#include <cinttypes>
#include <cstdio>
#include <vector>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "backend/base/status_mapping.h"
#include "server/llm/frontend/openai_codec.h"

namespace sluice::voice {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void String(Writer& w, std::string_view text) {
  const std::string valid = ValidUtf8(absl::string_view(text.data(), text.size()));
  w.String(valid.data(), static_cast<rapidjson::SizeType>(valid.size()));
}

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000.0; }

// The segments to write: the recognizer's, or (a recognizer that gave text but no segments) one segment spanning
// the recording.
std::vector<TranscriptSegment> SegmentsOf(const Recognition& r) {
  if (!r.segments.empty() || r.transcript.text.empty()) return r.segments;
  return {TranscriptSegment{.start_ms = 0, .end_ms = static_cast<int64_t>(r.audio_seconds * 1000 + 0.5),
                            .text = r.transcript.text}};
}

// One cue's text on one line: a line end inside it would end the cue (or, blank, the cue list).
std::string CueText(const std::string& text) {
  std::string line = ValidUtf8(absl::StripAsciiWhitespace(text));
  for (char& c : line) {
    if (c == '\r' || c == '\n') c = ' ';
  }
  return line;
}

std::string Timestamp(int64_t ms, char separator) {
  if (ms < 0) ms = 0;
  char buffer[48];
  std::snprintf(buffer, sizeof(buffer), "%02" PRId64 ":%02" PRId64 ":%02" PRId64 "%c%03" PRId64, ms / 3600000,
                ms / 60000 % 60, ms / 1000 % 60, separator, ms % 1000);
  return buffer;
}

std::string VerboseJson(const Recognition& r, const TranscriptionRequest& request) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("task");
  w.String("transcribe");
  w.Key("language");
  String(w, r.language.empty() ? request.options.language : r.language);
  w.Key("duration");
  w.Double(r.audio_seconds);
  w.Key("text");
  String(w, r.transcript.text);
  if (request.segment_timestamps) {
    w.Key("segments");
    w.StartArray();
    const std::vector<TranscriptSegment> segments = SegmentsOf(r);
    for (size_t i = 0; i < segments.size(); ++i) {
      const TranscriptSegment& s = segments[i];
      w.StartObject();
      w.Key("id");
      w.Int64(static_cast<int64_t>(i));
      w.Key("seek");  // Whisper's: the segment's window offset in 10 ms mel frames
      w.Int64(s.start_ms / 10);
      w.Key("start");
      w.Double(Seconds(s.start_ms));
      w.Key("end");
      w.Double(Seconds(s.end_ms));
      w.Key("text");
      String(w, s.text);
      w.Key("tokens");
      w.StartArray();
      w.EndArray();
      w.Key("temperature");
      w.Double(request.options.temperature);
      w.EndObject();
    }
    w.EndArray();
  }
  if (request.word_timestamps) {
    w.Key("words");
    w.StartArray();
    for (const WordTiming& word : r.transcript.words) {
      w.StartObject();
      w.Key("word");
      String(w, word.word);
      w.Key("start");
      w.Double(Seconds(word.start_ms));
      w.Key("end");
      w.Double(Seconds(word.end_ms));
      w.EndObject();
    }
    w.EndArray();
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

std::string Cues(const Recognition& r, bool vtt) {
  std::string out = vtt ? "WEBVTT\n\n" : "";
  int cue = 0;
  for (const TranscriptSegment& s : SegmentsOf(r)) {
    const std::string text = CueText(s.text);
    if (text.empty()) continue;  // an empty cue line would read as the cue's end
    if (!vtt) absl::StrAppend(&out, ++cue, "\n");
    const std::string start = vtt ? VttTimestamp(s.start_ms) : SrtTimestamp(s.start_ms);
    const std::string end = vtt ? VttTimestamp(s.end_ms) : SrtTimestamp(s.end_ms);
    absl::StrAppend(&out, start, " --> ", end, "\n", text, "\n\n");
  }
  return out;
}

}  // namespace

absl::Status CheckAnswerable(const Recognition& recognition, const TranscriptionRequest& request,
                             std::string_view model) {
  if (!request.word_timestamps || recognition.word_times) return absl::OkStatus();
  return WithRequestField(
      absl::InvalidArgumentError(absl::StrCat("'timestamp_granularities[]' word is not supported by model '",
                                              absl::string_view(model.data(), model.size()),
                                              "': its recognizer gives no word times (use segment)")),
      "timestamp_granularities[]");
}

std::string SrtTimestamp(int64_t ms) { return Timestamp(ms, ','); }
std::string VttTimestamp(int64_t ms) { return Timestamp(ms, '.'); }

TranscriptionBody FormatTranscription(const Recognition& recognition, const TranscriptionRequest& request) {
  switch (request.format) {
    case TranscriptFormat::kText:
      return {"text/plain; charset=utf-8", absl::StrCat(ValidUtf8(recognition.transcript.text), "\n")};
    case TranscriptFormat::kVerboseJson:
      return {"application/json", VerboseJson(recognition, request)};
    case TranscriptFormat::kSrt:
      return {"text/plain; charset=utf-8", Cues(recognition, /*vtt=*/false)};
    case TranscriptFormat::kVtt:
      return {"text/vtt; charset=utf-8", Cues(recognition, /*vtt=*/true)};
    case TranscriptFormat::kJson:
      break;
  }
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("text");
  String(w, recognition.transcript.text);
  w.EndObject();
  return {"application/json", std::string(buffer.GetString(), buffer.GetSize())};
}

}  // namespace sluice::voice
