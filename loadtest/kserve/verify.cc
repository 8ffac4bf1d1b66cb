#include "loadtest/kserve/verify.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "backend/reference_set.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/kserve/output_compare.h"

namespace sluice::loadtest {
namespace {

constexpr size_t kMaxFailuresListed = 5;

inference::ModelInferRequest RequestFor(const ModelInfo& model, const HostTensor& input, int case_index) {
  inference::ModelInferRequest request;
  request.set_model_name(model.name);
  request.set_id(absl::StrCat("verify-", case_index));
  auto* tensor = request.add_inputs();
  tensor->set_name(model.input_name);
  tensor->set_datatype(DataTypeName(input.dtype));
  tensor->add_shape(1);
  for (int64_t d : input.shape) tensor->add_shape(d);
  request.add_raw_input_contents(reinterpret_cast<const char*>(input.bytes.data()), input.bytes.size());
  return request;
}

}  // namespace

absl::StatusOr<VerifyReport> VerifyModel(InferClient& client, const ModelInfo& model,
                                         const std::string& model_repository, double tolerance, double timeout_ms) {
  const std::string dir = (std::filesystem::path(model_repository) / model.name).string();
  absl::StatusOr<std::vector<ReferenceCase>> cases = LoadReferenceSet(dir);
  if (!cases.ok()) return cases.status();
  VerifyReport report;
  report.model = model.name;
  report.tolerance = tolerance;
  auto fail = [&](std::string what) {
    ++report.mismatched_cases;
    if (report.failures.size() < kMaxFailuresListed) report.failures.push_back(std::move(what));
  };
  for (size_t k = 0; k < cases->size(); ++k) {
    const ReferenceCase& c = (*cases)[k];
    ++report.cases;
    if (c.inputs.size() != 1) {
      fail(absl::StrCat("case ", k, ": ", c.inputs.size(), " inputs (the load generator sends one)"));
      continue;
    }
    const auto deadline = std::chrono::system_clock::now() +
                          std::chrono::microseconds(static_cast<int64_t>(timeout_ms * 1e3));
    inference::ModelInferResponse response;
    grpc::Status status = client.Infer(RequestFor(model, c.inputs[0], static_cast<int>(k)), deadline, &response);
    if (!status.ok()) {
      ++report.failed_calls;
      fail(absl::StrCat("case ", k, " (length ", c.length(), "): ", GrpcCodeName(status.error_code()), ": ",
                        status.error_message()));
      continue;
    }
    bool case_ok = true;
    std::string why;
    for (size_t j = 0; j < c.outputs.size() && j < model.output_names.size(); ++j) {
      absl::StatusOr<DecodedOutput> got = DecodeOutput(response, model.output_names[j]);
      absl::StatusOr<std::vector<double>> expected = ToDoubles(c.outputs[j]);
      if (!got.ok() || !expected.ok()) {
        case_ok = false;
        why = std::string((!got.ok() ? got.status() : expected.status()).message());
        continue;
      }
      TensorComparison cmp = CompareTensor(got->shape, got->values, c.outputs[j].shape, *expected, tolerance);
      report.max_abs_error = std::max(report.max_abs_error, cmp.max_abs_error);
      report.mismatched_elements += cmp.mismatched;
      if (!cmp.ok()) {
        case_ok = false;
        why = cmp.shape_matches
                  ? absl::StrCat(model.output_names[j], ": ", cmp.mismatched, " of ", cmp.elements,
                                 " elements off by more than ", cmp.allowed_error, " (max ", cmp.max_abs_error, ")")
                  : absl::StrCat(model.output_names[j], ": shape ", ShapeToString(got->shape), " vs reference ",
                                 ShapeToString(c.outputs[j].shape));
      }
    }
    if (!case_ok) fail(absl::StrCat("case ", k, " (length ", c.length(), "): ", why));
  }
  return report;
}

}  // namespace sluice::loadtest
