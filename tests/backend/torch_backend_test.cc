// The libtorch backend on the real exported example graphs: every bucket loads and matches the unpadded
// Python reference; padding never changes a row's real output (the core promise); device edge cases.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "backend/backend.h"
#include "backend/base/model_config.h"
#include "backend/reference_set.h"
#include "tests/backend/test_models.h"
#include "tests/float_tolerance.h"

namespace sluice {
namespace {

using ::sluice::testing::BatchOfCases;
using ::sluice::testing::ExampleModelDir;
using ::sluice::testing::CrossShapeTolerance;
using ::sluice::testing::MaxAbsDiffOnRow;
using ::testing::HasSubstr;

// One loaded CPU instance per example model, shared by the tests (loading every bucket takes seconds).
struct LoadedExample {
  std::unique_ptr<ModelConfig> config;
  std::unique_ptr<Backend> instance;
  std::vector<ReferenceCase> cases;
};

LoadedExample& Example(const std::string& name) {
  static auto* examples = new std::map<std::string, LoadedExample>();
  auto it = examples->find(name);
  if (it != examples->end()) return it->second;
  LoadedExample example;
  absl::StatusOr<ModelConfig> config = LoadModelConfig(ExampleModelDir(name));
  EXPECT_TRUE(config.ok()) << config.status();
  if (config.ok()) {
    example.config = std::make_unique<ModelConfig>(*config);
    InstanceGroup group{1, DeviceKind::kCpu, std::nullopt, 1};
    absl::StatusOr<std::unique_ptr<Backend>> instance = Backend::Create({example.config.get(), group, 0, 1});
    EXPECT_TRUE(instance.ok()) << instance.status();
    if (instance.ok()) example.instance = std::move(*instance);
    absl::StatusOr<std::vector<ReferenceCase>> cases = LoadReferenceSet(ExampleModelDir(name));
    EXPECT_TRUE(cases.ok()) << cases.status();
    if (cases.ok()) example.cases = std::move(*cases);
  }
  return examples->emplace(name, std::move(example)).first->second;
}

// Runs `rows` padded into bucket (batch, length) and checks every row against its unpadded reference.
void ExpectBatchMatchesReference(LoadedExample& example, int batch_size, int64_t length,
                                 const std::vector<const ReferenceCase*>& rows, std::mt19937& rng) {
  const ModelConfig& model = *example.config;
  absl::StatusOr<BatchResult> result =
      example.instance->Execute(BatchOfCases(model, batch_size, length, rows, rng));
  ASSERT_TRUE(result.ok()) << result.status();
  for (int r = 0; r < batch_size; ++r) {
    for (size_t o = 0; o < model.outputs.size(); ++o) {
      const HostTensor& want = rows[r]->outputs[o];
      if (model.outputs[o].has_variable_axis()) {
        ASSERT_EQ(result->output_lengths[r], want.shape[0])
            << model.name << " bucket (" << batch_size << ", " << length << ") row " << r << " length "
            << rows[r]->length();
      }
      EXPECT_LE(MaxAbsDiffOnRow(result->outputs[o], r, want), CrossShapeTolerance(want.values<float>()))
          << model.name << " bucket (" << batch_size << ", " << length << ") row " << r << " length "
          << rows[r]->length() << " output " << model.outputs[o].name;
    }
  }
}

class ExampleModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ExampleModelTest, EveryBucketLoadsWarmsAndMatchesTheUnpaddedReference) {
  LoadedExample& example = Example(GetParam());
  ASSERT_TRUE(example.instance && !example.cases.empty());
  const ModelConfig& model = *example.config;
  EXPECT_EQ(example.instance->load_stats().size(), model.buckets.lengths.size() * model.buckets.batch_sizes.size());
  for (const BucketLoadStats& stats : example.instance->load_stats()) {
    EXPECT_GT(stats.load_seconds, 0) << stats.batch_size << "x" << stats.length;
    EXPECT_GT(stats.warm_seconds, 0) << stats.batch_size << "x" << stats.length;
  }
  std::mt19937 rng(7);
  size_t next = 0;
  for (int64_t length : model.buckets.lengths) {
    std::vector<const ReferenceCase*> fitting;
    for (const ReferenceCase& c : example.cases) {
      if (c.length() <= length) fitting.push_back(&c);
    }
    ASSERT_FALSE(fitting.empty()) << "no reference case fits length " << length;
    for (int batch_size : model.buckets.batch_sizes) {
      std::vector<const ReferenceCase*> rows;
      for (int r = 0; r < batch_size; ++r) rows.push_back(fitting[next++ % fitting.size()]);
      ExpectBatchMatchesReference(example, batch_size, length, rows, rng);
    }
  }
}

TEST_P(ExampleModelTest, PaddingNeverChangesARowsRealOutput) {
  // The largest batch in the largest bucket, filled with inputs of all different real lengths (short ones
  // padded by more than 90 %), the padding full of noise: each row must equal its input run alone, unpadded.
  LoadedExample& example = Example(GetParam());
  ASSERT_TRUE(example.instance && !example.cases.empty());
  const ModelConfig& model = *example.config;
  std::vector<const ReferenceCase*> rows;
  for (int r = 0; r < model.max_batch_size(); ++r) rows.push_back(&example.cases[r % example.cases.size()]);
  std::set<int64_t> distinct;
  for (const ReferenceCase* c : rows) distinct.insert(c->length());
  EXPECT_GE(distinct.size(), std::min<size_t>(rows.size(), 4)) << "the reference set lacks length variety";
  std::mt19937 rng(11);
  ExpectBatchMatchesReference(example, model.max_batch_size(), model.max_length(), rows, rng);
}

TEST_P(ExampleModelTest, UncompiledBucketIsRejected) {
  LoadedExample& example = Example(GetParam());
  ASSERT_TRUE(example.instance);
  PaddedBatch batch{3, example.config->buckets.lengths.front(), {}, {1, 1, 1}};
  absl::Status status = example.instance->Execute(batch).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch size not compiled"));
}

INSTANTIATE_TEST_SUITE_P(Examples, ExampleModelTest, ::testing::Values("asr_ctc", "text_embed"));

TEST(TorchBackendTest, MissingGraphFileIsAClearError) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(ExampleModelDir("text_embed"));
  ASSERT_TRUE(config.ok()) << config.status();
  config->buckets.lengths.push_back(999999);  // no graph was exported for this length
  InstanceGroup group{1, DeviceKind::kCpu, std::nullopt, 1};
  auto instance = Backend::Create({&*config, group, 0, 1});
  ASSERT_FALSE(instance.ok());
  EXPECT_EQ(instance.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(instance.status().message(), HasSubstr("cannot load text_embed bucket (batch 1, length 999999)"));
  EXPECT_THAT(instance.status().message(), HasSubstr("graphs/b1_l999999.pt"));
}

TEST(TorchBackendTest, CudaWithoutCudaIsAClearError) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(ExampleModelDir("text_embed"));
  ASSERT_TRUE(config.ok()) << config.status();
  InstanceGroup group{1, DeviceKind::kCuda, std::nullopt, 1};
  auto instance = Backend::Create({&*config, group, 0, 1});
  if (instance.ok()) GTEST_SKIP() << "this libtorch has CUDA and a GPU: the error path cannot be exercised";
  EXPECT_EQ(instance.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(instance.status().message(), HasSubstr("device cuda requested, but this libtorch has no usable CUDA"));
}

}  // namespace
}  // namespace sluice
