// The example models (text_embed, asr_digits) through the Neuron Runtime backend and the fake libnrt, whose
// stand-in NEFFs run each bucket's exported TorchScript graph over the bytes the backend bound
// (make_nrt_example_models.py): the answers equal the TorchScript path's within the shared float tolerance, every
// bucket of a replica binds the same single device copy of each weight, and each replica loads onto its own core.
// What this proves is sluice's side of the C API (manifest roles, byte layouts, padding, lengths, weights once);
// what a real NEFF and libnrt do is not exercised: UNVERIFIED ON HARDWARE.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <algorithm>
#include <cmath>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "backend/nrt/safetensors_file.h"
#include "tests/backend/fake_nrt_controls.h"
#include "tests/float_tolerance.h"

namespace sluice {
namespace {

using testing::FakeNrt;

absl::StatusOr<std::unique_ptr<Backend>> CreateReplica(const ModelConfig& config, int replica) {
  InstanceOptions options;
  options.model = &config;
  options.group = config.instances[0];
  if (options.group.cores) options.group.cores = ReplicaCores(*options.group.cores, options.group.count, replica);
  options.replica = replica;
  options.warmup_runs = 0;  // the comparison below runs every bucket it needs
  return Backend::Create(options);
}

// A batch of real rows of different lengths (the last one shortest), zero past each row's length as the
// scheduler pads: audio in [-0.5, 0.5), token ids inside the config's range.
PaddedBatch RandomBatch(const ModelConfig& config, int batch, int64_t length, uint32_t seed) {
  std::mt19937 gen(seed);
  PaddedBatch p{batch, length, {}, {}};
  for (int b = 0; b < batch; ++b) p.row_lengths.push_back(std::max<int64_t>(1, length - b * length / (batch + 1)));
  for (const TensorSpec& spec : config.inputs) {
    HostTensor t = HostTensor::Zeros(spec.dtype, {batch, length});
    for (int b = 0; b < batch; ++b) {
      for (int64_t i = 0; i < p.row_lengths[b]; ++i) {
        if (spec.dtype == DataType::kInt64) {
          t.values<int64_t>()[b * length + i] = std::uniform_int_distribution<int64_t>(1, 8000)(gen);
        } else {
          t.values<float>()[b * length + i] = std::uniform_real_distribution<float>(-0.5f, 0.5f)(gen);
        }
      }
    }
    p.inputs.push_back(std::move(t));
  }
  return p;
}

// The largest difference between the real part of each row of `got` and `want` (all of a fixed-shape output).
void ExpectSameRealRows(const BatchResult& want, const BatchResult& got, const ModelConfig& config) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  EXPECT_EQ(got.output_lengths, want.output_lengths);
  for (size_t o = 0; o < want.outputs.size(); ++o) {
    const HostTensor& w = want.outputs[o];
    const HostTensor& g = got.outputs[o];
    ASSERT_EQ(g.shape, w.shape) << config.outputs[o].name;
    const int64_t rows = w.shape[0];
    const int64_t per_row = w.values<float>().size() / rows;
    const int64_t per_step = config.has_variable_output() ? per_row / w.shape[1] : per_row;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t real = config.has_variable_output() ? want.output_lengths[r] * per_step : per_row;
      std::span<const float> wr = w.values<float>().subspan(r * per_row, real);
      std::span<const float> gr = g.values<float>().subspan(r * per_row, real);
      const double tolerance = testing::CrossShapeTolerance(wr);
      double worst = 0;
      for (size_t i = 0; i < wr.size(); ++i) worst = std::max(worst, std::abs(double{gr[i]} - wr[i]));
      EXPECT_LE(worst, tolerance) << config.outputs[o].name << " row " << r << " of " << rows;
    }
  }
}

class NrtExampleModelsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_NE(fake_.handle, nullptr) << dlerror();
    fake_.reset();
    unsetenv("NEURON_RT_VISIBLE_CORES");  // every core visible: the runtime's core n is the machine's core n
  }
  FakeNrt fake_{SLUICE_FAKE_LIBNRT};
};

TEST_P(NrtExampleModelsTest, AnswersAsTheTorchScriptPathWithOneWeightCopyPerReplica) {
  const std::string name = GetParam();
  absl::StatusOr<ModelConfig> torch_config = LoadModelConfig(absl::StrCat(SLUICE_MODELS_DIR, "/", name));
  absl::StatusOr<ModelConfig> nrt_config = LoadModelConfig(absl::StrCat(SLUICE_NRT_MODELS_DIR, "/", name, "_nrt"));
  ASSERT_TRUE(torch_config.ok()) << torch_config.status();
  ASSERT_TRUE(nrt_config.ok()) << nrt_config.status();
  ASSERT_EQ(nrt_config->instances[0].count, 2);
  const int first_core = nrt_config->instances[0].cores->first;
  absl::StatusOr<SafetensorsFile> weights =
      SafetensorsFile::Open(absl::StrCat(SLUICE_NRT_MODELS_DIR, "/", name, "_nrt/weights.safetensors"));
  ASSERT_TRUE(weights.ok()) << weights.status();
  const int weight_count = static_cast<int>(weights->tensors().size());
  int64_t weight_bytes = 0;
  for (const auto& [tensor, entry] : weights->tensors()) weight_bytes += static_cast<int64_t>(entry.size());
  const int buckets = static_cast<int>(nrt_config->buckets.lengths.size() * nrt_config->buckets.batch_sizes.size());

  absl::StatusOr<std::unique_ptr<Backend>> reference = CreateReplica(*torch_config, 0);
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::vector<std::unique_ptr<Backend>> replicas;
  for (int replica = 0; replica < 2; ++replica) {
    absl::StatusOr<std::unique_ptr<Backend>> backend = CreateReplica(*nrt_config, replica);
    ASSERT_TRUE(backend.ok()) << backend.status();
    replicas.push_back(*std::move(backend));
  }
  // Every bucket NEFF loaded once per replica, each replica on its own core; one device tensor per weight per
  // replica, however many buckets bind it.
  ASSERT_EQ(fake_.counter("loads"), 2 * buckets);
  for (int i = 0; i < 2 * buckets; ++i) {
    EXPECT_EQ(fake_.load_arg(i, 0), first_core + i / buckets) << "load " << i;
    EXPECT_EQ(fake_.load_arg(i, 1), -1) << "vnc_count is deprecated in nrt.h: -1";
  }
  EXPECT_EQ(fake_.allocations_named("weight:"), 2 * weight_count) << buckets << " buckets";
  EXPECT_EQ(fake_.counter("host_allocations"), 0);
  EXPECT_EQ(replicas[0]->memory().weight_bytes, weight_bytes);
  EXPECT_EQ(replicas[0]->memory().graphs, buckets);

  // Small, large and mixed buckets, rows of different lengths, on both replicas.
  const auto& lengths = nrt_config->buckets.lengths;
  const auto& sizes = nrt_config->buckets.batch_sizes;
  const std::vector<std::pair<int, int64_t>> cases = {
      {sizes.front(), lengths.front()}, {sizes.back(), lengths[1]}, {sizes[1], lengths.back()}};
  uint32_t seed = 1;
  for (const auto& [batch, length] : cases) {
    SCOPED_TRACE(absl::StrCat(name, " bucket (", batch, ", ", length, ")"));
    const PaddedBatch input = RandomBatch(*torch_config, batch, length, seed++);
    absl::StatusOr<BatchResult> want = (*reference)->Execute(input);
    ASSERT_TRUE(want.ok()) << want.status();
    for (const auto& replica : replicas) {
      absl::StatusOr<BatchResult> got = replica->Execute(input);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectSameRealRows(*want, *got, *nrt_config);
    }
  }
  EXPECT_EQ(fake_.counter("execute"), 2 * static_cast<int>(cases.size()));
  EXPECT_EQ(fake_.allocations_named("weight:"), 2 * weight_count) << "executing allocates no weights";

  replicas.clear();
  EXPECT_EQ(fake_.counter("unloads"), 2 * buckets);
  EXPECT_EQ(fake_.counter("live_tensors"), 0);
  EXPECT_EQ(fake_.counter("close"), 1);
}

INSTANTIATE_TEST_SUITE_P(ExampleModels, NrtExampleModelsTest, ::testing::Values("text_embed", "asr_digits"));

}  // namespace
}  // namespace sluice
