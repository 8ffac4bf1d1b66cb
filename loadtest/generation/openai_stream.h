// The OpenAI-compatible streaming wire format as a load generator sees it (--api openai), in pure functions: the
// request body of POST /v1/completions (or /v1/chat/completions) with stream, stream_options.include_usage,
// max_tokens, ignore_eos, temperature and seed; the Server-Sent Events framing of the answer; each event's chunk
// (text, finish reason, usage, error, [DONE]); and the check of the `usage` the server reports against what was
// streamed and what was asked. The API-neutral request and outcome (and their trip through the runner) are in
// generation_call.h.
// Thread-safety: SseParser and OpenAiStreamState are used by one thread; everything else is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/generation/generation_call.h"

namespace sluice::loadtest {

// The JSON body (stream: true, stream_options.include_usage: true).
std::string EncodeOpenAiCompletionBody(const GenerationSpec& spec);
const char* OpenAiPath(const GenerationSpec& spec);

// Splits a Server-Sent Events byte stream into events; returns the data of each event completed by `bytes`
// (multi-line data joined with '\n'; comments, event names and ids ignored). CRLF and LF line ends both work.
class SseParser {
 public:
  std::vector<std::string> Feed(absl::string_view bytes);

 private:
  std::string line_;   // the incomplete line
  std::string data_;   // the current event's data so far
  bool has_data_ = false;
};

// One event's data decoded.
struct OpenAiChunk {
  bool done = false;                // "[DONE]"
  std::optional<std::string> text;  // choices[0].text, or choices[0].delta.content
  std::optional<std::string> finish_reason;
  std::optional<int64_t> prompt_tokens, completion_tokens;  // usage
  std::optional<std::string> error_message;                 // {"error": {...}}
  std::string error_type;
};
absl::StatusOr<OpenAiChunk> ParseOpenAiChunk(absl::string_view data);

// Folds the events of one stream into an outcome.
class OpenAiStreamState {
 public:
  // Feeds bytes received `at_s` seconds after sending. A malformed event is kept as an error.
  void Feed(absl::string_view bytes, double at_s);
  const GenerationOutcome& outcome() const { return outcome_; }
  GenerationOutcome Take() { return std::move(outcome_); }

 private:
  SseParser parser_;
  GenerationOutcome outcome_;
};

// The result of a stream that ended (HTTP 200): OK; an SSE error event's code (from its type); UNAVAILABLE when
// the stream ended without [DONE]; or kUsageMismatchCode when `usage` is missing or disagrees with the request
// (prompt ids sent: prompt_tokens must equal their count; ignore_eos with max_tokens: completion_tokens must equal
// max_tokens; completion_tokens never over max_tokens) or with the stream (more content chunks than completion
// tokens: fewer is allowed, the server merges held-back text into one chunk). The message names the numbers.
// Returned as a gRPC code number and message.
StreamVerdict JudgeStream(const GenerationOutcome& outcome, const GenerationSpec& spec);

// The gRPC code for an OpenAI error type (invalid_request_error -> INVALID_ARGUMENT, rate_limit_error ->
// RESOURCE_EXHAUSTED, authentication_error -> UNAUTHENTICATED, else INTERNAL).
int CodeForOpenAiErrorType(absl::string_view type);
// An OpenAI error body's message ({"error": {"message"}}), else the body itself (cut to 200 bytes).
std::string OpenAiErrorMessage(absl::string_view body);

}  // namespace sluice::loadtest
