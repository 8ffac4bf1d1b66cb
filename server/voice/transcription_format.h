// A Recognition (recognizer.h) -> the body of OpenAI's /v1/audio/transcriptions answer, in the format the request
// asked for:
//   json          {"text": "..."}                                                   application/json
//   text          the text and a line end                                             text/plain
//   verbose_json  {"task": "transcribe", "language", "duration", "text", "segments": [{id, seek, start, end, text,
//                 tokens, temperature}], "words": [{word, start, end}]}             application/json
//                 (segments unless only word granularity was asked for; words only when it was; seconds as numbers)
//   srt           SubRip cues from the segments: "1\n00:00:01,000 --> 00:00:02,500\ntext\n\n"  text/plain
//   vtt           WebVTT: "WEBVTT\n\n00:00:01.000 --> 00:00:02.500\ntext\n\n"                 text/vtt
// Fields a recognizer does not give (Whisper's avg_logprob, compression_ratio, no_speech_prob) are left out rather
// than invented. Text is written as valid UTF-8 (invalid sequences replaced by U+FFFD).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

#include "server/voice/recognizer.h"
#include "server/voice/transcription_form.h"

namespace sluice::voice {

struct TranscriptionBody {
  std::string content_type;
  std::string body;
};

// OK when `recognition` can answer `request`; InvalidArgument naming timestamp_granularities[] (attached as the
// error's field) when word times were asked for and `model`'s recognizer gave none.
absl::Status CheckAnswerable(const Recognition& recognition, const TranscriptionRequest& request,
                             std::string_view model);

// REQUIRES: CheckAnswerable(recognition, request, ...) is OK.
// `request.options.language` stands in for the recognition's language when the recognizer gives none.
TranscriptionBody FormatTranscription(const Recognition& recognition, const TranscriptionRequest& request);

// "HH:MM:SS,mmm" (SubRip) and "HH:MM:SS.mmm" (WebVTT); negative times are written as 0, hours past 99 in full.
std::string SrtTimestamp(int64_t ms);
std::string VttTimestamp(int64_t ms);

}  // namespace sluice::voice
