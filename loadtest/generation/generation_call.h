// One generation request and what its stream produced, whatever API carried it (--api openai: OpenAI streamed
// completions over HTTP, openai_stream.h; --api triton-stream: Triton's ModelStreamInfer over gRPC,
// triton_stream.h). A generation request travels through the load generator's runner as the runner's own Call
// (core/call.h; so that the runner's loops, caps, warm-up and records serve every API alike), and comes back as an
// Outcome whose `generation` holds the streamed result: GenerationSpec <-> Call and GenerationOutcome <-> Outcome
// are the conversions here. Each API's client (a LoadClient, core/load_client.h) turns the spec into its wire
// request and its stream into a GenerationOutcome; generation_load.h picks the client by API.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/core/call.h"

namespace sluice::loadtest {

class GenerationPlan;

// One generation request. Exactly one of prompt_ids / prompt_text is the prompt.
struct GenerationSpec {
  std::string model;
  std::vector<int32_t> prompt_ids;  // sent as an array of token ids (exact prompt length, no tokenizer needed)
  std::string prompt_text;          // sent as text
  // A text prompt's length as the server will count it (the client's own tokenization with the model's tokenizer,
  // BOS included), when known. Token-id prompts: their count.
  std::optional<int64_t> prompt_tokens;
  int64_t max_tokens = 0;  // 0: not sent (the server's default)
  bool ignore_eos = false;
  std::optional<double> temperature;  // not sent when absent (the server's default)
  std::optional<int64_t> seed;
  bool chat = false;  // openai: /v1/chat/completions with one user message (text prompts only)
};

// Carried in a Call: input "prompt_ids" (INT32) or "text_input" (BYTES, raw), parameters max_tokens, ignore_eos,
// temperature, seed, chat, prompt_tokens. (The workload's calls carry generic INT64 token ids, read as prompt ids.)
Call GenerationSpecToCall(const GenerationSpec& spec);
absl::StatusOr<GenerationSpec> GenerationSpecFromCall(const Call& call);

// What one streamed request produced. Times are seconds since the request was sent.
struct GenerationOutcome {
  std::vector<double> chunk_times_s;  // arrival of each content chunk (response) with non-empty text
  std::string text;
  // openai: from `usage`; triton-stream (no usage on the wire): the client's count of the prompt it sent, and
  // max_tokens under ignore_eos (else the count of text responses, a lower bound).
  std::optional<int64_t> prompt_tokens, completion_tokens;
  std::string finish_reason;
  bool done = false;  // the stream's end marker: openai data: [DONE]; triton-stream triton_final_response
  std::optional<std::string> error_message;
  std::string error_type;

  int64_t chunks() const { return static_cast<int64_t>(chunk_times_s.size()); }
};

// A finished stream's result for the runner: a gRPC code number (or kUsageMismatchCode) and a message.
struct StreamVerdict {
  int code = 0;
  std::string message;
};

// The spec a client sends for `call`: with a plan, a workload call (its id the index) becomes the plan's request
// for that index, its drawn prompt ids standing for the prompt length; else the call's own spec.
absl::StatusOr<GenerationSpec> GenerationSpecOfCall(const Call& call, const GenerationPlan* plan);

// The outcome carried back through the runner: the verdict's code and message, the stream as Outcome::generation
// (absent token counts as 0, as the report counts them).
Outcome GenerationOutcomeToOutcome(const GenerationOutcome& outcome, const StreamVerdict& verdict);
// Outcome::generation back (done set); empty when there is none.
GenerationOutcome GenerationOutcomeOf(const Outcome& outcome);

// --verify's comparison for generation: `pieces[k]` is the text that reference token k adds (an incremental
// detokenizer's output; may be empty while a character is incomplete). Returns -1 when `served` is exactly their
// concatenation, else the first token whose text does not continue `served` (pieces.size() when `served` goes on
// past the reference).
int FirstMismatchedToken(const std::vector<std::string>& pieces, absl::string_view served);

}  // namespace sluice::loadtest
