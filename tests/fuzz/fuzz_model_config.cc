// Fuzzes the model config YAML (backend/base/model_config.h): YamlNode::LoadString, then ParseModelConfig on
// arbitrary text. A config that parses is then used the way the server uses one: ValidateInputs gets the largest
// request the buckets allow (its shape's element count is computed before the byte count is compared), and
// BatchedShape / elements_per_step / GraphPath / AcceleratorsHeld are computed.
// Asserts beyond "no crash, no ASan/UBSan report (signed overflow included)": the documented invariants of a parsed
// config: non-empty inputs and outputs with distinct non-empty names; every input has its variable axis (-1)
// first; other dimensions positive; at most one variable axis per tensor; bucket lengths and batch sizes positive
// and strictly ascending (after their conversion to the fields' types); max_queue_size >= 1; a finite
// max_queue_delay_ms >= 0; 1 <= default_priority_level <= priority_levels <= 16; instance counts 1..64; a sim
// cost model of finite numbers, base_ms and per_sample_us >= 0, output_steps_per_input_step > 0.
#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "backend/base/cost.h"
#include "tests/fuzz/fuzz_model_under_test.h"

namespace sluice::fuzz {
namespace {

void CheckTensors(const std::vector<TensorSpec>& specs, bool inputs) {
  FUZZ_CHECK(!specs.empty(), "at least one tensor");
  std::set<std::string> names;
  for (const TensorSpec& spec : specs) {
    FUZZ_CHECK(!spec.name.empty() && names.insert(spec.name).second, spec.name);
    FUZZ_CHECK(!spec.shape.empty(), spec.name);
    int variable = 0;
    for (size_t i = 0; i < spec.shape.size(); ++i) {
      if (spec.shape[i] == kVariableDim) {
        ++variable;
        if (inputs) FUZZ_CHECK(i == 0, spec.name);
      } else {
        FUZZ_CHECK(spec.shape[i] > 0, spec.name);
      }
    }
    FUZZ_CHECK(variable <= 1 && (!inputs || variable == 1), spec.name);
    if (spec.sample_rate) FUZZ_CHECK(*spec.sample_rate > 0, spec.name);
    if (spec.value_range) FUZZ_CHECK(spec.value_range->min <= spec.value_range->max, spec.name);
    (void)BatchedShape(spec);
    (void)spec.elements_per_step();
  }
}

void CheckModel(const ModelConfig& model) {
  CheckTensors(model.inputs, true);
  CheckTensors(model.outputs, false);
  const BucketSpec& b = model.buckets;
  FUZZ_CHECK(!b.lengths.empty() && !b.batch_sizes.empty(), "buckets");
  for (size_t i = 0; i < b.lengths.size(); ++i) {
    FUZZ_CHECK(b.lengths[i] > 0 && (i == 0 || b.lengths[i] > b.lengths[i - 1]), "bucket lengths");
  }
  for (size_t i = 0; i < b.batch_sizes.size(); ++i) {
    FUZZ_CHECK(b.batch_sizes[i] > 0 && (i == 0 || b.batch_sizes[i] > b.batch_sizes[i - 1]),
               absl::StrCat("batch size ", b.batch_sizes[i]));
  }
  const BatchingOptions& q = model.batching;
  FUZZ_CHECK(q.max_queue_size >= 1, absl::StrCat("max_queue_size ", q.max_queue_size));
  FUZZ_CHECK(std::isfinite(q.max_queue_delay_ms) && q.max_queue_delay_ms >= 0,
             absl::StrCat("max_queue_delay_ms ", q.max_queue_delay_ms));
  FUZZ_CHECK(std::isfinite(q.execution_timeout_ms) && q.execution_timeout_ms >= 0,
             absl::StrCat("execution_timeout_ms ", q.execution_timeout_ms));
  FUZZ_CHECK(q.priority_levels >= 1 && q.priority_levels <= 16, "priority_levels");
  FUZZ_CHECK(q.default_priority_level >= 1 && q.default_priority_level <= q.priority_levels, "default level");
  for (const InstanceGroup& group : model.instances) FUZZ_CHECK(group.count >= 1 && group.count <= 64, "count");
  if (model.sim) {
    FUZZ_CHECK(std::isfinite(model.sim->base_ms) && model.sim->base_ms >= 0, "sim.base_ms");
    FUZZ_CHECK(std::isfinite(model.sim->per_sample_us) && model.sim->per_sample_us >= 0, "sim.per_sample_us");
    FUZZ_CHECK(std::isfinite(model.sim->output_steps_per_input_step) && model.sim->output_steps_per_input_step > 0,
               "sim.output_steps_per_input_step");
  }
  (void)AcceleratorsHeld(model);
  (void)model.GraphPath(model.max_batch_size(), model.max_length());
  (void)model.has_variable_output();

  // The largest request the buckets admit, with no data: ValidateInputs computes its element count (which must
  // not overflow) and then refuses it for its byte count.
  std::vector<WireTensor> request;
  for (const TensorSpec& spec : model.inputs) {
    WireTensor tensor{spec.name, DataTypeName(spec.dtype), BatchedShape(spec), {}};
    tensor.shape[0] = model.max_batch_size();
    tensor.shape[1] = model.max_length();
    request.push_back(std::move(tensor));
  }
  (void)ValidateInputs(model, request);
}

}  // namespace
}  // namespace sluice::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sluice;
  if (size > 64 * 1024) return 0;  // configs are small; yaml-cpp is slow on huge inputs
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(std::string(reinterpret_cast<const char*>(data), size),
                                                       "fuzz/config.yaml");
  if (!root.ok()) return 0;
  absl::StatusOr<ModelConfig> model = ParseModelConfig(*root, "");
  if (model.ok()) fuzz::CheckModel(*model);
  return 0;
}
