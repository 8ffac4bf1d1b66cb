// Fuzzes Triton's decoupled text-generation request decoding on arbitrary bytes: inference::ModelInferRequest::
// ParseFromArray, then DecodeTritonGenerate (server/llm/frontend/triton_stream_codec.h) as the ModelStreamInfer front end runs
// it, then the responses it writes for that request (text, a bare final flag, an error).
// Asserts beyond "no crash, no ASan/UBSan report":
//   - a refusal is InvalidArgument; a decoded request has a plain-text prompt (never ids or chat messages) and
//     echoes the wire's model name and id;
//   - an encoded response names the model and id, carries text_output only when given text, and its
//     triton_final_response parameter is the final flag.
#include <cstdint>
#include <string>

#include "grpc_service.pb.h"
#include "server/llm/frontend/triton_stream_codec.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  if (size > (1u << 20)) return 0;  // the parse is linear; larger inputs only slow the search down
  inference::ModelInferRequest wire;
  if (!wire.ParseFromArray(data, static_cast<int>(size))) return 0;

  inference::ModelStreamInferResponse response;
  absl::StatusOr<TritonGenerateRequest> request = DecodeTritonGenerate(wire);
  if (!request.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(request.status()), request.status().ToString());
    EncodeTritonError(wire.model_name(), wire.id(), request.status(), response);
    FUZZ_CHECK(response.error_message() == request.status().message(), "the error's message");
    return 0;
  }
  FUZZ_CHECK(request->call.prompt.has_value() && !request->call.prompt_ids && !request->call.messages,
             "a plain-text prompt");
  FUZZ_CHECK(request->model == wire.model_name() && request->id == wire.id(), "model and id echoed");

  const std::string text = *request->call.prompt;
  for (bool final : {false, true}) {
    EncodeTritonText(request->model, request->id, &text, final, response);
    const auto& out = response.infer_response();
    FUZZ_CHECK(out.model_name() == request->model && out.id() == request->id, "names the model and id");
    FUZZ_CHECK(out.outputs_size() == 1 && out.raw_output_contents_size() == 1, "one text_output");
    FUZZ_CHECK(out.raw_output_contents(0) == SerializeBytesElement(text), "the text, BYTES-serialized");
    auto flag = out.parameters().find("triton_final_response");
    FUZZ_CHECK(flag != out.parameters().end() && flag->second.bool_param() == final, "the final flag");
  }
  EncodeTritonText(request->model, request->id, nullptr, true, response);
  FUZZ_CHECK(response.infer_response().outputs_size() == 0, "a bare final flag has no outputs");
  return 0;
}
