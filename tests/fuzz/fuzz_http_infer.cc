// Fuzzes the KServe v2 REST infer body with the binary-data extension: DecodeHttpInfer (server/kserve/http_codec.h), then,
// when it decodes, ParseInferParameters, ValidateInputs and SelectOutputs against the fixed `tagger` model
// (fuzz_model_under_test.h), as ServedModel::Infer runs them.
// Input: a first line that is the Inference-Header-Content-Length (decimal; anything else means the header is
// absent), then the body (JSON header, then the binary tensors).
// Asserts beyond "no crash, no ASan/UBSan report":
//   - a decoded call has one binary_data flag per requested output; every input's bytes are either a view into
//     the body's binary section (past the JSON header) or into the call's own storage; the binary views are
//     consecutive and claim the whole binary section (binary_data_size arithmetic);
//   - accepted parameters give a priority within 0..priority_levels;
//   - what ValidateInputs/SelectOutputs accept keeps their contracts (CheckValidated, CheckSelected).
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/clock.h"
#include "server/kserve/http_codec.h"
#include "server/core/infer_parameters.h"
#include "tests/fuzz/fuzz_model_under_test.h"

namespace sluice::fuzz {
namespace {

bool Within(std::string_view inner, std::string_view outer) {
  return inner.data() >= outer.data() && inner.data() + inner.size() <= outer.data() + outer.size();
}

void CheckDecoded(const std::string& body, size_t json_length, const HttpInferCall& decoded) {
  const InferCall& call = decoded.call;
  FUZZ_CHECK(decoded.binary_output.size() == call.requested_outputs.size(), "a binary_data flag per output");
  const std::string_view binary = std::string_view(body).substr(json_length);
  size_t next = 0;  // binary inputs take consecutive slices of the binary section, in input order
  for (const WireTensor& input : call.inputs) {
    if (!input.bytes.empty() && Within(input.bytes, binary)) {
      FUZZ_CHECK(static_cast<size_t>(input.bytes.data() - binary.data()) == next, input.name);
      next += input.bytes.size();
      continue;
    }
    bool owned = false;
    for (const std::string& stored : call.storage) owned = owned || Within(input.bytes, stored);
    FUZZ_CHECK(owned || input.bytes.empty(), absl::StrCat("input '", input.name, "' views foreign memory"));
  }
  FUZZ_CHECK(next == binary.size(), "the binary section is claimed exactly");
}

}  // namespace
}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t newline = input.find('\n');
  if (newline == std::string_view::npos) return 0;
  const std::string_view length_text = input.substr(0, newline);
  std::optional<size_t> header_length;
  size_t value = 0;
  if (!length_text.empty() &&
      std::from_chars(length_text.data(), length_text.data() + length_text.size(), value).ptr ==
          length_text.data() + length_text.size()) {
    header_length = value;
  }
  const std::string body(input.substr(newline + 1));

  absl::StatusOr<HttpInferCall> decoded = DecodeHttpInfer(body, header_length);
  if (!decoded.ok()) return 0;
  fuzz::CheckDecoded(body, header_length.value_or(body.size()), *decoded);

  const ModelConfig& model = fuzz::Tagger();
  absl::StatusOr<InferOptions> options =
      ParseInferParameters(decoded->call.parameters, model.batching.priority_levels, absl::Now());
  if (options.ok()) {
    FUZZ_CHECK(options->priority >= 0 && options->priority <= model.batching.priority_levels, "priority");
  }
  absl::StatusOr<ValidatedRequest> validated = ValidateInputs(model, decoded->call.inputs);
  if (validated.ok()) fuzz::CheckValidated(model, *validated);
  absl::StatusOr<std::vector<size_t>> selected = SelectOutputs(model, decoded->call.requested_outputs);
  if (selected.ok()) fuzz::CheckSelected(model, decoded->call.requested_outputs, *selected);
  return 0;
}
