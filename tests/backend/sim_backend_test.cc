// The sim device: latency from the cost model (spent through an injected sleeper), deterministic outputs.
#include "backend/sim_backend.h"

#include <gtest/gtest.h>

namespace sluice {
namespace {

ModelConfig SimModel() {
  ModelConfig model;
  model.name = "sim_asr";
  model.kind = ModelKind::kSpeech;
  model.inputs = {{"audio", DataType::kFp32, {kVariableDim}, 16000}};
  model.outputs = {{"log_probs", DataType::kFp32, {kVariableDim, 3}, std::nullopt},
                   {"score", DataType::kInt64, {2}, std::nullopt}};
  model.buckets = {{100, 200}, {1, 4}};
  model.instances = {{1, DeviceKind::kSim}};
  model.sim = SimCostModel{2.0, 0.5, 0.25};
  return model;
}

PaddedBatch Batch(int batch_size, int64_t length, std::vector<int64_t> row_lengths) {
  return {batch_size, length, {HostTensor::Zeros(DataType::kFp32, {batch_size, length})}, std::move(row_lengths)};
}

TEST(SimBackendTest, SleepsForTheCostModelLatency) {
  ModelConfig model = SimModel();
  std::vector<absl::Duration> slept;
  auto backend = CreateSimBackend({&model, model.instances[0]}, [&](absl::Duration d) { slept.push_back(d); });
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_TRUE((*backend)->Execute(Batch(4, 200, {10, 200, 1, 50})).ok());
  ASSERT_EQ(slept.size(), 1u);
  EXPECT_EQ(slept[0], absl::Milliseconds(2) + absl::Microseconds(0.5 * 4 * 200));
  EXPECT_EQ(SimLatency(*model.sim, 1, 100), absl::Microseconds(2050));
}

TEST(SimBackendTest, OutputsFollowTheDocumentedContract) {
  ModelConfig model = SimModel();
  auto backend = CreateSimBackend({&model, model.instances[0]}, [](absl::Duration) {});
  ASSERT_TRUE(backend.ok());
  absl::StatusOr<BatchResult> result = (*backend)->Execute(Batch(4, 200, {10, 200, 1, 50}));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->output_lengths, (std::vector<int64_t>{3, 50, 1, 13}));  // ceil(len * 0.25)
  const HostTensor& log_probs = result->outputs[0];
  EXPECT_EQ(log_probs.shape, (std::vector<int64_t>{4, 50, 3}));
  auto values = log_probs.values<float>();
  EXPECT_EQ(values[0], 10.0f);              // row 0, step 0
  EXPECT_EQ(values[3 * 3 - 1], 10.0f);      // row 0, last real step
  EXPECT_EQ(values[3 * 3], 0.0f);           // row 0, first padded step
  EXPECT_EQ(values[150 + 49 * 3 + 2], 200.0f);  // row 1 is full
  const HostTensor& score = result->outputs[1];
  EXPECT_EQ(score.shape, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(score.values<int64_t>()[7], 50);
}

TEST(SimBackendTest, RejectsBatchesThatDoNotMatchACompiledBucket) {
  ModelConfig model = SimModel();
  auto backend = CreateSimBackend({&model, model.instances[0]}, [](absl::Duration) {});
  ASSERT_TRUE(backend.ok());
  EXPECT_EQ((*backend)->Execute(Batch(2, 100, {1, 1})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*backend)->Execute(Batch(1, 150, {1})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*backend)->Execute(Batch(1, 100, {101})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*backend)->Execute(Batch(1, 100, {0})).status().code(), absl::StatusCode::kInvalidArgument);
  PaddedBatch wrong_dtype = Batch(1, 100, {5});
  wrong_dtype.inputs[0] = HostTensor::Zeros(DataType::kInt64, {1, 100});
  absl::Status status = (*backend)->Execute(wrong_dtype).status();
  EXPECT_NE(status.message().find("input 'audio' must be FP32 [1, 100]"), std::string::npos) << status;
}

}  // namespace
}  // namespace sluice
