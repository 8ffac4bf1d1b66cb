// KServe v2 REST with the binary tensor data extension, client side: a ModelInferRequest (raw input contents)
// becomes a JSON header followed by the inputs' bytes (Inference-Header-Content-Length says where the header
// ends); a response, binary or JSON data, becomes a ModelInferResponse with raw_output_contents. An HTTP error
// status becomes a gRPC code through the server's own table (backend/base/status_mapping.h, StatusCodeForHttp),
// so the HTTP client reports results exactly as the gRPC one does.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "grpc_service.pb.h"

namespace sluice::loadtest {

struct HttpInferBody {
  std::string body;          // JSON header, then the binary data of every input in order
  size_t header_length = 0;  // the value of Inference-Header-Content-Length
};

// Asks for binary outputs (parameters.binary_data_output) and, when `timeout_us` > 0, passes Triton's "timeout"
// parameter (µs) so that the server drops the request when the client stops waiting, like a gRPC deadline.
// The request's own int64/bool/string parameters are copied. REQUIRES: inputs carry raw_input_contents.
HttpInferBody EncodeHttpInferRequest(const inference::ModelInferRequest& request, int64_t timeout_us);

// `header_length`: the response's Inference-Header-Content-Length (absent: the body is all JSON). Outputs with
// parameters.binary_data_size take the next bytes after the header; outputs with "data" (flat or nested) are
// converted to raw little-endian bytes of their datatype.
absl::StatusOr<inference::ModelInferResponse> DecodeHttpInferResponse(const std::string& body,
                                                                      std::optional<size_t> header_length);

// The "error" member of a KServe error body, else the body's first 200 bytes.
std::string HttpErrorMessage(const std::string& body);

}  // namespace sluice::loadtest
