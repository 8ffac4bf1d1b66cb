#include "server/voice/transcription_form.h"

#include <cmath>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backend/base/status_mapping.h"

namespace sluice::voice {
namespace {

constexpr char kAccepted[] = "file, model, language, prompt, response_format, temperature, timestamp_granularities[]";
constexpr size_t kMaxShortField = 256;  // model, language, response_format, ...: names, never long

absl::string_view A(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Refuse(absl::string_view field, absl::string_view message) {
  return WithRequestField(absl::InvalidArgumentError(message), field);
}

bool IsLanguageTag(std::string_view tag) {
  if (tag.empty() || tag.size() > 35) return false;  // BCP 47's longest common tags fit easily
  for (char c : tag) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return absl::ascii_isalpha(static_cast<unsigned char>(tag.front()));
}

absl::StatusOr<TranscriptFormat> ParseFormat(std::string_view value) {
  for (TranscriptFormat f : {TranscriptFormat::kJson, TranscriptFormat::kText, TranscriptFormat::kVerboseJson,
                             TranscriptFormat::kSrt, TranscriptFormat::kVtt}) {
    if (value == TranscriptFormatName(f)) return f;
  }
  return Refuse("response_format", absl::StrCat("'response_format' '", A(value.substr(0, kMaxShortField)),
                                                "' is not supported: use json, text, verbose_json, srt or vtt"));
}

absl::StatusOr<float> ParseTemperature(std::string_view value) {
  double t = 0;
  if (!absl::SimpleAtod(A(value), &t) || !std::isfinite(t)) {
    return Refuse("temperature", absl::StrCat("'temperature' must be a number, not '",
                                              A(value.substr(0, kMaxShortField)), "'"));
  }
  if (t < 0 || t > 1) return Refuse("temperature", absl::StrCat("'temperature' ", t, " is outside [0, 1]"));
  return static_cast<float>(t);
}

}  // namespace

const char* TranscriptFormatName(TranscriptFormat format) {
  switch (format) {
    case TranscriptFormat::kJson: return "json";
    case TranscriptFormat::kText: return "text";
    case TranscriptFormat::kVerboseJson: return "verbose_json";
    case TranscriptFormat::kSrt: return "srt";
    case TranscriptFormat::kVtt: return "vtt";
  }
  return "json";
}

absl::StatusOr<TranscriptionRequest> DecodeTranscriptionForm(const MultipartForm& form) {
  TranscriptionRequest request;
  std::set<std::string> seen;
  bool have_file = false;
  bool have_granularities = false;
  for (const MultipartPart& part : form.parts) {
    const std::string& name = part.name;
    const std::string_view value = part.data;
    if (name.empty()) {  // no field to name in the error's param: the message says it
      return absl::InvalidArgumentError("a form part has an empty name (Content-Disposition name=\"\")");
    }
    const bool repeatable = name == "timestamp_granularities[]" || name == "timestamp_granularities";
    if (!repeatable && !seen.insert(name).second) {
      return Refuse(name, absl::StrCat("field '", name.substr(0, kMaxShortField), "' is given more than once"));
    }
    if (name != "file" && name != "prompt" && value.size() > kMaxShortField) {
      return Refuse(name, absl::StrCat("field '", name.substr(0, kMaxShortField), "' is longer than ",
                                       kMaxShortField, " bytes"));
    }
    if (name == "file") {
      if (value.empty()) return Refuse("file", "'file' is empty: send the audio file's bytes");
      request.audio = value;
      request.filename = part.filename.value_or("");
      have_file = true;
    } else if (name == "model") {
      request.model = std::string(value);
    } else if (name == "language") {
      if (!value.empty() && !IsLanguageTag(value)) {
        return Refuse("language", absl::StrCat("'language' '", A(value), "' is not an ISO-639-1 code or BCP-47 tag"));
      }
      request.options.language = std::string(value);
    } else if (name == "prompt") {
      if (value.size() > kMaxTranscriptionPromptBytes) {
        return Refuse("prompt", absl::StrCat("'prompt' is ", value.size(), " bytes; at most ",
                                             kMaxTranscriptionPromptBytes, " are accepted"));
      }
      request.options.prompt = std::string(value);
    } else if (name == "response_format") {
      absl::StatusOr<TranscriptFormat> format = ParseFormat(value);
      if (!format.ok()) return format.status();
      request.format = *format;
    } else if (name == "temperature") {
      absl::StatusOr<float> temperature = ParseTemperature(value);
      if (!temperature.ok()) return temperature.status();
      request.options.temperature = *temperature;
    } else if (repeatable) {
      have_granularities = true;
      if (value == "word") {
        request.word_timestamps = true;
      } else if (value == "segment") {
        request.segment_timestamps = true;
      } else {
        return Refuse("timestamp_granularities[]", absl::StrCat("'timestamp_granularities[]' '", A(value),
                                                                "' is not supported: use word or segment"));
      }
    } else if (name == "stream") {
      if (value != "false") {
        return Refuse("stream", "'stream' is not supported on /v1/audio/transcriptions: the transcript is answered "
                                "whole (send stream=false or leave it out)");
      }
    } else {
      return Refuse(name, absl::StrCat("unknown field '", name.substr(0, kMaxShortField), "' (accepted: ",
                                       kAccepted, ")"));
    }
  }
  if (!have_file) return Refuse("file", "no 'file' field: send the audio as the form's file part");
  if (have_granularities && request.format != TranscriptFormat::kVerboseJson) {
    return Refuse("timestamp_granularities[]",
                  absl::StrCat("'timestamp_granularities[]' needs response_format verbose_json, not ",
                               TranscriptFormatName(request.format)));
  }
  // verbose_json carries segments unless only words were asked for (OpenAI's default granularity is segment).
  if (request.format == TranscriptFormat::kVerboseJson && !request.word_timestamps) request.segment_timestamps = true;
  return request;
}

}  // namespace sluice::voice
