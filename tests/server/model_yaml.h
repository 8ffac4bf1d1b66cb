// Test helper: model configs from YAML text for the in-process front-end tests, and the `tagger` model they share.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backend/base/model_config.h"

namespace sluice::testing {

// A model's config.yaml text parsed into a ModelConfig; a parse error fails the calling test.
inline ModelConfig ParseModelYaml(const std::string& yaml) {
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(yaml, "test.yaml");
  EXPECT_TRUE(root.ok()) << root.status();
  absl::StatusOr<ModelConfig> model = ParseModelConfig(*root, "");
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

// A text model with two inputs (INT64 tokens with a declared range, FP32 features of width 3) and two outputs (a
// variable-length FP32 logits, a fixed-shape INT64 score).
inline constexpr char kTaggerYaml[] = R"(name: tagger
kind: text
inputs:
  - {name: tokens, dtype: INT64, shape: [-1], range: [0, 999]}
  - {name: features, dtype: FP32, shape: [-1, 3]}
outputs:
  - {name: logits, dtype: FP32, shape: [-1, 5]}
  - {name: score, dtype: INT64, shape: [2]}
buckets: {lengths: [4, 8], batch_sizes: [1, 2, 4]}
batching: {max_queue_delay_ms: 2.5, max_queue_size: 16}
instances: [{count: 2, device: cpu}]
)";

inline ModelConfig TaggerModel() { return ParseModelYaml(kTaggerYaml); }

}  // namespace sluice::testing
