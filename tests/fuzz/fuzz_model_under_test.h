// The fixed model the request fuzzers validate against (tests/fuzz/): the `tagger` of the front-end tests, an INT64
// input with a declared range, an FP32 input of width 3, two outputs; buckets up to length 8, batch 4. Also the
// checks every fuzzer applies to what ValidateInputs / SelectOutputs accepted.
#pragma once

#include <cmath>
#include <cstring>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "backend/base/model_config.h"
#include "backend/base/yaml_node.h"
#include "server/core/input_validation.h"
#include "tests/server/tagger_yaml.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice::fuzz {

inline const ModelConfig& Tagger() {
  static const ModelConfig model = [] {
    absl::StatusOr<YamlNode> root = YamlNode::LoadString(testing::kTaggerYaml, "tagger.yaml");
    if (!root.ok()) std::abort();
    absl::StatusOr<ModelConfig> parsed = ParseModelConfig(*root, "");
    if (!parsed.ok()) std::abort();
    return *parsed;
  }();
  return model;
}

// What ValidateInputs promises for a request it accepted: rows and length within the model's buckets, one tensor
// per declared input and row, each [length, ...fixed dims] of the declared dtype with exactly that many bytes, and
// values that pass the value checks (finite floats, integers within `range`).
inline void CheckValidated(const ModelConfig& model, const ValidatedRequest& request) {
  FUZZ_CHECK(request.rows >= 1 && request.rows <= model.max_batch_size(), absl::StrCat("rows ", request.rows));
  FUZZ_CHECK(request.length >= 1 && request.length <= model.max_length(), absl::StrCat("length ", request.length));
  FUZZ_CHECK(static_cast<int64_t>(request.row_inputs.size()) == request.rows, "one entry per row");
  for (const auto& row : request.row_inputs) {
    FUZZ_CHECK(row.size() == model.inputs.size(), "one tensor per declared input");
    for (size_t i = 0; i < row.size(); ++i) {
      const TensorSpec& spec = model.inputs[i];
      const HostTensor& tensor = row[i];
      FUZZ_CHECK(tensor.dtype == spec.dtype, spec.name);
      FUZZ_CHECK(tensor.shape.size() == spec.shape.size() && tensor.shape[0] == request.length, spec.name);
      for (size_t d = 1; d < spec.shape.size(); ++d) FUZZ_CHECK(tensor.shape[d] == spec.shape[d], spec.name);
      FUZZ_CHECK(static_cast<int64_t>(tensor.bytes.size()) ==
                     tensor.num_elements() * static_cast<int64_t>(DataTypeSize(tensor.dtype)),
                 spec.name);
      if (tensor.dtype == DataType::kFp32) {
        for (float v : tensor.values<float>()) FUZZ_CHECK(std::isfinite(v), spec.name);
      }
      if (spec.value_range && tensor.dtype == DataType::kInt64) {
        for (int64_t v : tensor.values<int64_t>()) {
          FUZZ_CHECK(v >= spec.value_range->min && v <= spec.value_range->max, absl::StrCat(spec.name, " ", v));
        }
      }
    }
  }
}

// SelectOutputs' promise: every output when none is named, else one distinct declared output per name, in order.
inline void CheckSelected(const ModelConfig& model, std::span<const std::string> names,
                          const std::vector<size_t>& selected) {
  FUZZ_CHECK(selected.size() == (names.empty() ? model.outputs.size() : names.size()), "one index per output");
  std::set<size_t> seen;
  for (size_t k = 0; k < selected.size(); ++k) {
    FUZZ_CHECK(selected[k] < model.outputs.size() && seen.insert(selected[k]).second, "distinct declared outputs");
    if (!names.empty()) FUZZ_CHECK(model.outputs[selected[k]].name == names[k], names[k]);
  }
}

}  // namespace sluice::fuzz
