// Triton's decoupled text-generation protocol (the one its vLLM and TensorRT-LLM backends speak over
// ModelStreamInfer) <-> sluice's GenerationCall and back. Wire format only: value ranges are checked once, by
// GenerationModel::Generate.
//
// A request names the model and carries the input `text_input` (BYTES [1]) and optionally `max_tokens`
// (INT32/INT64 [1]), `stream` (BOOL [1]; absent or false: one response with the whole text), `exclude_input_in_output`
// (BOOL [1]; as vLLM's backend: a non-streamed answer starts with the prompt unless it is true, a streamed one never
// does, and asking for the prompt in a stream is refused), `sampling_parameters` (BYTES [1]: a JSON object with
// temperature, top_p, top_k, seed, stop, ignore_eos, max_tokens; numbers may be given as strings) and the
// TensorRT-LLM scalars `temperature`, `top_p`, `top_k`, `random_seed`. The request's parameters may carry the same
// sampling keys (the inputs win) and `triton_enable_empty_final_response`.
// A response carries `text_output` (BYTES [1], raw_output_contents) and the parameter `triton_final_response`
// (false until the request's last response).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"
#include "grpc_service.pb.h"
#include "server/llm/generation_model.h"

namespace sluice {

struct TritonGenerateRequest {
  std::string model;
  std::string id;  // echoed in every response
  GenerationCall call;
  bool stream = false;
  bool empty_final = false;  // triton_enable_empty_final_response: the final flag may come without outputs
};

// InvalidArgument naming the input or parameter.
absl::StatusOr<TritonGenerateRequest> DecodeTritonGenerate(const inference::ModelInferRequest& request);

// One response of a request (`response` is cleared first): `text` (nullptr: no outputs, a bare final flag) and the
// final flag.
void EncodeTritonText(absl::string_view model, absl::string_view id, const std::string* text, bool final,
                      inference::ModelStreamInferResponse& response);
// A request's error: error_message, and infer_response naming the model and the request id, final.
void EncodeTritonError(absl::string_view model, absl::string_view id, const absl::Status& status,
                       inference::ModelStreamInferResponse& response);

// KServe/Triton descriptions of a generation model: text_input BYTES [1] (and the optional inputs above) in,
// text_output BYTES [-1] out.
void FillGenerationModelMetadata(const ModelConfig& model, inference::ModelMetadataResponse& response);
void FillGenerationModelConfig(const ModelConfig& model, inference::ModelConfig& config);

// BYTES tensor serialization (each element: 4-byte little-endian length, then the bytes).
std::string SerializeBytesElement(absl::string_view element);

}  // namespace sluice
