// Fuzzes the KServe v2 gRPC ModelInfer path on arbitrary bytes: inference::ModelInferRequest::ParseFromArray, then
// DecodeInferRequest (server/kserve/grpc_codec.h), ParseInferParameters (server/core/infer_parameters.h), ValidateInputs and
// SelectOutputs against the fixed `tagger` model (fuzz_model_under_test.h), as the gRPC front end runs them.
// Asserts beyond "no crash, no ASan/UBSan report":
//   - a decoded call has one input per wire input, in order, with the wire's name, datatype and shape; with
//     raw_input_contents each input's bytes are exactly its raw entry (a view, not a copy), otherwise they live in
//     the call's own storage;
//   - accepted parameters give a priority within 0..priority_levels;
//   - what ValidateInputs/SelectOutputs accept keeps their contracts (CheckValidated, CheckSelected).
#include <cstdint>

#include "absl/time/clock.h"
#include "grpc_service.pb.h"
#include "server/kserve/grpc_codec.h"
#include "server/core/infer_parameters.h"
#include "tests/fuzz/fuzz_model_under_test.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  if (size > (1u << 20)) return 0;  // the parse is linear; larger inputs only slow the search down
  inference::ModelInferRequest request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return 0;

  absl::StatusOr<GrpcInferCall> decoded = DecodeInferRequest(request);
  if (!decoded.ok()) return 0;
  const InferCall& call = decoded->call;
  FUZZ_CHECK(call.inputs.size() == static_cast<size_t>(request.inputs_size()), "one input per wire input");
  for (int i = 0; i < request.inputs_size(); ++i) {
    const WireTensor& tensor = call.inputs[i];
    const auto& wire = request.inputs(i);
    FUZZ_CHECK(tensor.name == wire.name() && tensor.datatype == wire.datatype(), wire.name());
    FUZZ_CHECK(tensor.shape.size() == static_cast<size_t>(wire.shape_size()), wire.name());
    if (decoded->raw) {
      const std::string& raw = request.raw_input_contents(i);
      FUZZ_CHECK(tensor.bytes.data() == raw.data() && tensor.bytes.size() == raw.size(), "a view of its raw entry");
    } else {
      bool owned = false;
      for (const std::string& stored : call.storage) {
        owned = owned || (tensor.bytes.data() == stored.data() && tensor.bytes.size() == stored.size());
      }
      FUZZ_CHECK(owned, "typed contents are converted into the call's storage");
    }
  }

  const ModelConfig& model = fuzz::Tagger();
  absl::StatusOr<InferOptions> options =
      ParseInferParameters(call.parameters, model.batching.priority_levels, absl::Now());
  if (options.ok()) {
    FUZZ_CHECK(options->priority >= 0 && options->priority <= model.batching.priority_levels, "priority");
  }
  absl::StatusOr<ValidatedRequest> validated = ValidateInputs(model, call.inputs);
  if (validated.ok()) fuzz::CheckValidated(model, *validated);
  absl::StatusOr<std::vector<size_t>> selected = SelectOutputs(model, call.requested_outputs);
  if (selected.ok()) fuzz::CheckSelected(model, call.requested_outputs, *selected);
  return 0;
}
