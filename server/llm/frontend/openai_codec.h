// OpenAI-compatible JSON <-> sluice's GenerationCall and back: /v1/completions and /v1/chat/completions request
// bodies, their whole responses, their streamed chunks (Server-Sent Events framing), /v1/embeddings' bodies <->
// EmbeddingCall / EmbeddingResult, the /v1/models list and OpenAI's error object. Wire format only: value ranges
// (temperature, top_p, max_tokens, prompt length, stop count) are checked once, by GenerationModel::Generate, for
// every front end. What the codec refuses is what
// cannot be said in a GenerationCall at all: a field of the wrong JSON type, batched prompts, n > 1, logprobs,
// and the other OpenAI features sluice does not implement.
// Bodies are parsed iteratively (RapidJSON's kParseIterativeFlag) and nesting deeper than kMaxJsonDataDepth is
// refused, as on the KServe JSON path (server/kserve/http_codec.h); the body size is bounded by the HTTP server.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/llm/embedding_call.h"
#include "server/llm/generation_model.h"

namespace sluice {

enum class OpenAiEndpoint { kCompletions, kChat };

// A decoded request: the model it names, the call for GenerationModel::Generate (or why the body says no valid
// call: the model then counts and answers the refusal) and the response options.
struct OpenAiRequest {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string model;
  absl::StatusOr<GenerationCall> call;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with the usage
};

// An error only when the body names no model (malformed JSON, not an object, too deep, no "model"); any other
// problem is in `call`. Errors are InvalidArgument naming the field; the field is also attached for the error's
// "param" (WithRequestField). Sampling defaults are OpenAI's: temperature 1, top_p 1 (top_k 0: all, as in vLLM).
absl::StatusOr<OpenAiRequest> DecodeOpenAiRequest(OpenAiEndpoint endpoint, absl::string_view body);

// The request field an error names (RequestField: set by DecodeOpenAiRequest or GenerationModel), or "".
std::string OpenAiErrorParam(const absl::Status& status);

// `text` with every invalid UTF-8 sequence replaced by U+FFFD, so that JSON written from it is valid.
std::string ValidUtf8(absl::string_view text);

// What every response and chunk of one request repeats.
struct OpenAiResponseHead {
  OpenAiEndpoint endpoint = OpenAiEndpoint::kCompletions;
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  std::string model;
  int64_t created = 0;  // Unix seconds
};

// A fresh head: a random id with the endpoint's prefix and the current time.
OpenAiResponseHead NewOpenAiResponseHead(OpenAiEndpoint endpoint, std::string model);

// "stop" or "length" (the finishes of an OK summary).
const char* OpenAiFinishReason(FinishReason finish);

// The whole (non-streamed) response: "text_completion" or "chat.completion" with usage.
std::string EncodeOpenAiResponse(const OpenAiResponseHead& head, absl::string_view text,
                                 const GenerationSummary& summary);

// Streamed chunks ("text_completion" / "chat.completion.chunk"), each one JSON object:
// chat's first chunk: delta {role: assistant, content: ""}.
std::string EncodeOpenAiRoleChunk(const OpenAiResponseHead& head);
// A piece of text: completions {text}, chat delta {content}; finish_reason null.
std::string EncodeOpenAiTextChunk(const OpenAiResponseHead& head, absl::string_view text);
// The last choice chunk: empty text / empty delta with the finish reason.
std::string EncodeOpenAiFinishChunk(const OpenAiResponseHead& head, FinishReason finish);
// With include_usage: choices [] and the usage.
std::string EncodeOpenAiUsageChunk(const OpenAiResponseHead& head, const GenerationSummary& summary);

// Server-Sent Events framing: "data: <json>\n\n", and the terminator "data: [DONE]\n\n".
std::string SseEvent(absl::string_view json);
inline constexpr absl::string_view kSseDone = "data: [DONE]\n\n";

// {"error": {"message", "type", "param", "code"}}: type from the HTTP status (invalid_request_error,
// authentication_error, rate_limit_error, server_error), param from OpenAiErrorParam, `code` as given (e.g.
// "model_not_found"; empty: null).
std::string OpenAiErrorJson(const absl::Status& status, absl::string_view code = {});
// The type OpenAiErrorJson writes for an HTTP status.
const char* OpenAiErrorType(int http_status);

// One entry of GET /v1/models. Beyond OpenAI's fields: the limits a client needs to build valid requests without
// the model's files — max_model_len (vLLM's name: prompt + output tokens), vocab_size (token ids in [0, it)) and
// max_prompt_tokens (the largest prompt bucket). 0 leaves a limit out.
struct OpenAiModelCard {
  std::string id;
  int64_t max_model_len = 0;
  int64_t vocab_size = 0;
  int64_t max_prompt_tokens = 0;
};

// GET /v1/models: {object "list", data [{id, object "model", created, owned_by "sluice", the limits}]}.
std::string EncodeOpenAiModelList(const std::vector<OpenAiModelCard>& models, int64_t created);

// ---- POST /v1/embeddings ----------------------------------------------------------------------------------------
// The most inputs one embeddings request may carry (OpenAI's limit).
inline constexpr size_t kMaxEmbeddingInputs = 2048;

// A decoded embeddings request: the model, the texts (or why the body holds no valid call: a refusal naming the
// field, answered as it is) and the response options. `dimensions` is checked against the model by the service.
struct OpenAiEmbeddingRequest {
  std::string model;
  absl::StatusOr<EmbeddingCall> call;
  bool base64 = false;                // encoding_format "base64": each vector as little-endian float32 bytes
  std::optional<int64_t> dimensions;  // as given
};

// `input`: a string or an array of 1..kMaxEmbeddingInputs strings, none empty; token-id arrays are refused by
// name. `encoding_format`: "float" (default) or "base64". `user` (a string) is accepted and ignored. An error only
// when the body names no model (as DecodeOpenAiRequest).
absl::StatusOr<OpenAiEmbeddingRequest> DecodeOpenAiEmbeddingRequest(absl::string_view body);

// {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] | "<base64>"}], "model",
// "usage": {"prompt_tokens", "total_tokens"}}.
std::string EncodeOpenAiEmbeddingResponse(absl::string_view model, const EmbeddingResult& result, bool base64);

}  // namespace sluice
