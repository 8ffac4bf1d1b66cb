// KServe v2 REST infer bodies <-> sluice's InferCall / InferResult: JSON tensors (RapidJSON) and the binary-data
// extension (Inference-Header-Content-Length + per-tensor binary_data_size). No I/O, no state, no validation
// beyond the wire format (ServedModel::Infer validates once for every front end).
// JSON tensor data is flattened iteratively, never by recursion, and nesting deeper than kMaxJsonDataDepth is
// refused: a hostile body cannot exhaust a thread's stack.
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/core/infer_call.h"

namespace sluice {

// Deeper than any tensor rank a model declares; the parser itself is run iteratively too.
inline constexpr int kMaxJsonDataDepth = 32;

struct HttpInferCall {
  InferCall call;
  std::vector<std::optional<bool>> binary_output;  // per requested output: its own binary_data parameter
};

// `header_length`: the Inference-Header-Content-Length value when present. REQUIRES: `body` outlives the result
// (binary inputs are views into it).
absl::StatusOr<HttpInferCall> DecodeHttpInfer(const std::string& body, std::optional<size_t> header_length);

struct HttpBody {
  std::string body;
  std::optional<size_t> header_length;  // set when binary outputs follow the JSON header
};

HttpBody EncodeHttpInfer(const ModelConfig& model, const std::string& id,
                         const std::vector<std::optional<bool>>& binary_output, const InferResult& result);

std::string ErrorJson(absl::string_view message);

}  // namespace sluice
