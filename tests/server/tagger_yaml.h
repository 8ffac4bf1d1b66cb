// The `tagger` model's config.yaml text, shared by the in-process front-end tests (tests/server/model_yaml.h) and
// the request fuzzers (tests/fuzz/fuzz_model_under_test.h). No test framework here: the fuzz build has none.
#pragma once

namespace sluice::testing {

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

}  // namespace sluice::testing
