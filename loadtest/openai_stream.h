// The OpenAI-compatible streaming wire format as a load generator sees it, in pure functions: the request body of
// POST /v1/completions (or /v1/chat/completions) with stream, stream_options.include_usage, max_tokens,
// ignore_eos, temperature and seed; the Server-Sent Events framing of the answer; each event's chunk (text,
// finish reason, usage, error, [DONE]); and the check of the `usage` the server reports against what was streamed
// and what was asked.
// A generation request travels through the load generator's runner as a KServe ModelInferRequest (so that the
// runner's loops, caps, warm-up and records serve every API alike): GenerationSpec <-> that message, and the
// streamed outcome <-> a ModelInferResponse, are the conversions here.
// Thread-safety: SseParser and OpenAiStreamState are used by one thread; everything else is pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpc_service.pb.h"

namespace sluice::loadtest {

// One generation request. Exactly one of prompt_ids / prompt_text is the prompt.
struct GenerationSpec {
  std::string model;
  std::vector<int32_t> prompt_ids;  // sent as an array of token ids (exact prompt length, no tokenizer needed)
  std::string prompt_text;          // sent as text (its length is known from `usage` only)
  int64_t max_tokens = 0;           // 0: not sent (the server's default)
  bool ignore_eos = false;
  std::optional<double> temperature;  // not sent when absent (the server's default)
  std::optional<int64_t> seed;
  bool chat = false;  // /v1/chat/completions with one user message (text prompts only)
};

// The JSON body (stream: true, stream_options.include_usage: true).
std::string EncodeOpenAiCompletionBody(const GenerationSpec& spec);
const char* OpenAiPath(const GenerationSpec& spec);

// Carried in a ModelInferRequest: input "prompt_ids" (INT32) or "text_input" (BYTES, raw), parameters max_tokens,
// ignore_eos, temperature, seed, chat.
void GenerationSpecToProto(const GenerationSpec& spec, inference::ModelInferRequest& proto);
absl::StatusOr<GenerationSpec> GenerationSpecFromProto(const inference::ModelInferRequest& proto);

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

// What one streamed request produced. Times are seconds since the request was sent.
struct OpenAiStreamOutcome {
  std::vector<double> chunk_times_s;  // arrival of each content chunk with non-empty text
  std::string text;
  std::optional<int64_t> prompt_tokens, completion_tokens;
  std::string finish_reason;
  bool done = false;  // [DONE] seen
  std::optional<std::string> error_message;
  std::string error_type;

  int64_t chunks() const { return static_cast<int64_t>(chunk_times_s.size()); }
};

// Folds the events of one stream into an outcome.
class OpenAiStreamState {
 public:
  // Feeds bytes received `at_s` seconds after sending. A malformed event is kept as an error.
  void Feed(absl::string_view bytes, double at_s);
  const OpenAiStreamOutcome& outcome() const { return outcome_; }
  OpenAiStreamOutcome Take() { return std::move(outcome_); }

 private:
  SseParser parser_;
  OpenAiStreamOutcome outcome_;
};

// The result of a stream that ended (HTTP 200): OK; an SSE error event's code (from its type); UNAVAILABLE when
// the stream ended without [DONE]; or kUsageMismatchCode when `usage` is missing or disagrees with the request
// (prompt ids sent: prompt_tokens must equal their count; ignore_eos with max_tokens: completion_tokens must equal
// max_tokens; completion_tokens never over max_tokens) or with the stream (more content chunks than completion
// tokens: fewer is allowed, the server merges held-back text into one chunk). The message names the numbers.
// Returned as a gRPC code number and message.
struct StreamVerdict {
  int code = 0;
  std::string message;
};
StreamVerdict JudgeStream(const OpenAiStreamOutcome& outcome, const GenerationSpec& spec);

// The gRPC code for an OpenAI error type (invalid_request_error -> INVALID_ARGUMENT, rate_limit_error ->
// RESOURCE_EXHAUSTED, authentication_error -> UNAUTHENTICATED, else INTERNAL).
int CodeForOpenAiErrorType(absl::string_view type);
// An OpenAI error body's message ({"error": {"message"}}), else the body itself (cut to 200 bytes).
std::string OpenAiErrorMessage(absl::string_view body);

// The outcome carried back through the runner: parameters prompt_tokens, completion_tokens, finish_reason;
// outputs text_output (BYTES raw) and chunk_times_s (FP64 raw).
void OutcomeToResponse(const OpenAiStreamOutcome& outcome, inference::ModelInferResponse& response);
OpenAiStreamOutcome OutcomeFromResponse(const inference::ModelInferResponse& response);

}  // namespace sluice::loadtest

namespace sluice::loadtest {

// --verify's comparison for generation: `pieces[k]` is the text that reference token k adds (an incremental
// detokenizer's output; may be empty while a character is incomplete). Returns -1 when `served` is exactly their
// concatenation, else the first token whose text does not continue `served` (pieces.size() when `served` goes on
// past the reference).
int FirstMismatchedToken(const std::vector<std::string>& pieces, absl::string_view served);

}  // namespace sluice::loadtest
