// OpenAI's POST /v1/audio/transcriptions form (multipart/form-data, server/http/multipart_form.h) -> what the
// transcription front end runs: the model name, the audio file's bytes, the Recognizer's options and the answer's
// format. Wire format only: the model, the audio and the recognizer's own limits (language, temperature) are checked
// by the service and the Recognizer, once, for every front end.
//
// Fields (OpenAI's names): `file` (required, once), `model`, `language`, `prompt`, `response_format` (json, text,
// verbose_json, srt, vtt), `temperature` (0..1), `timestamp_granularities[]` (word, segment; repeatable; only with
// verbose_json, as OpenAI requires), `stream` (false only: answers are whole). Every other field, a field given twice,
// and every unsupported value are refused InvalidArgument naming the field (attached for the error's "param",
// WithRequestField).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/http/multipart_form.h"
#include "server/voice/recognizer.h"

namespace sluice::voice {

enum class TranscriptFormat { kJson, kText, kVerboseJson, kSrt, kVtt };

// "json", "text", ...: the form value that names `format`.
const char* TranscriptFormatName(TranscriptFormat format);

// The most bytes a `prompt` may have (Whisper reads at most 224 tokens of it; a few KiB is already generous).
inline constexpr size_t kMaxTranscriptionPromptBytes = 8 << 10;

struct TranscriptionRequest {
  std::string model;         // "" picks the voice default
  std::string_view audio;    // the `file` part's bytes: a view into the request body
  std::string filename;      // as sent ("" when none)
  RecognizeOptions options;  // language, prompt, temperature (deadline: the service's)
  TranscriptFormat format = TranscriptFormat::kJson;
  bool word_timestamps = false;     // verbose_json with timestamp_granularities[] word
  bool segment_timestamps = false;  // verbose_json: segments (the default granularity, or asked for)
};

// REQUIRES: the body `form`'s views point into outlives the returned audio view.
absl::StatusOr<TranscriptionRequest> DecodeTranscriptionForm(const MultipartForm& form);

}  // namespace sluice::voice
