// Triton's decoupled text-generation protocol over ModelStreamInfer (the one its vLLM and TensorRT-LLM backends and
// sluice-server speak; server/llm/frontend/triton_stream_codec.h) as a load generator sees it (--api triton-stream), in pure
// functions: the request for a GenerationSpec; each response's text, final flag and error; the fold of one stream's
// responses into a GenerationOutcome; and the verdict on a stream that ended.
//
// A request carries text_input (BYTES [1]: the prompt as text; the protocol has no token-id prompts), stream = true,
// exclude_input_in_output = true (BOOL [1] each), sampling_parameters (BYTES [1], a JSON object: max_tokens,
// ignore_eos, temperature, seed — vLLM's form, which sluice also takes), the parameter
// triton_enable_empty_final_response = true, and the request id (echoed by every response). Responses carry
// text_output (BYTES [1], raw or typed contents) and the parameter triton_final_response (true on the last); an
// error response has error_message (and is final). The protocol reports no usage: the prompt's token count is the
// client's own (GenerationSpec::prompt_tokens), the output's is max_tokens under ignore_eos, else the number of
// text responses (a lower bound: a response may carry several tokens' text).
// Thread-safety: TritonStreamState is used by one thread at a time; everything else is pure.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpc_service.pb.h"
#include "loadtest/generation/generation_call.h"

namespace sluice::loadtest {

// The ModelStreamInfer request for `spec` (its prompt_text; token-id prompts cannot be sent: InvalidArgument).
absl::Status EncodeTritonGenerate(const GenerationSpec& spec, const std::string& id,
                                  inference::ModelInferRequest& request);

// One response decoded.
struct TritonResponse {
  std::string id;
  std::optional<std::string> error_message;  // error_message, when not empty
  bool final = false;                        // triton_final_response (an error response is final too)
  std::optional<std::string> text;           // text_output (its elements joined), when present
};
// InvalidArgument when text_output is not a well-formed BYTES tensor.
absl::StatusOr<TritonResponse> ParseTritonResponse(const inference::ModelStreamInferResponse& response);

// Folds the responses of one request's stream into an outcome.
class TritonStreamState {
 public:
  explicit TritonStreamState(std::string id) : id_(std::move(id)) {}
  // A response received `at_s` seconds after sending. A malformed response, one for another request id, or one
  // after the final response is kept as a protocol error (error_type "protocol").
  void Feed(const inference::ModelStreamInferResponse& response, double at_s);
  const GenerationOutcome& outcome() const { return outcome_; }
  GenerationOutcome Take() { return std::move(outcome_); }

 private:
  void Fail(std::string message);

  const std::string id_;
  GenerationOutcome outcome_;
};

// The result of a stream whose gRPC status was OK, and the token counts filled in (see above): an error response's
// code (CodeForTritonError; a protocol error is INTERNAL); UNAVAILABLE when the stream ended without a final
// response; kUsageMismatchCode when more text responses came than max_tokens allows (each carries at least one
// token's text); else OK.
StreamVerdict JudgeTritonStream(GenerationOutcome& outcome, const GenerationSpec& spec);

// The gRPC code of a ModelStreamInfer error response. The protocol carries a message only, so the code is read from
// its words as sluice and Triton phrase them: unknown model / not found -> NOT_FOUND, queue full ->
// RESOURCE_EXHAUSTED, deadline -> DEADLINE_EXCEEDED, draining / not ready / unavailable -> UNAVAILABLE, cancelled
// -> CANCELLED, a refused value ("must", "exceeds", "at most", "not supported", ...) -> INVALID_ARGUMENT, else
// UNKNOWN.
int CodeForTritonError(absl::string_view message);

// OK when the metadata describes a text-generation model as ModelStreamInfer serves it (an input text_input of
// datatype BYTES and an output text_output); FailedPrecondition naming its inputs otherwise.
absl::Status CheckGenerationMetadata(const inference::ModelMetadataResponse& metadata);

}  // namespace sluice::loadtest
