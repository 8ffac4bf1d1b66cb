// The Neuron path up to the edge of the hardware: library loading, core slicing, NEURON_RT_VISIBLE_CORES.
// Nothing here needs (or proves anything about) a real NeuronCore.
#include "backend/neuron_runtime.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "backend/backend.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(NeuronRuntimeTest, MissingLibraryIsAClearError) {
  absl::Status status = LoadNeuronLibrary("/nonexistent/libtorchneuron.so");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("'/nonexistent/libtorchneuron.so' could not be loaded"));
  EXPECT_THAT(status.message(), HasSubstr("neuron_library"));
}

TEST(NeuronRuntimeTest, ALoadableLibraryLoadsOnce) {
  // libm stands in for libtorchneuron.so: this only proves the dlopen path, not Neuron itself.
  EXPECT_TRUE(LoadNeuronLibrary("libm.so.6").ok());
  EXPECT_TRUE(LoadNeuronLibrary("libm.so.6").ok());
}

TEST(NeuronRuntimeTest, ReplicasSplitTheGroupsCoresEvenly) {
  EXPECT_EQ(NeuronReplicaCores({0, 3}, 2, 0), (CoreRange{0, 1}));
  EXPECT_EQ(NeuronReplicaCores({0, 3}, 2, 1), (CoreRange{2, 3}));
  EXPECT_EQ(NeuronReplicaCores({4, 7}, 4, 3), (CoreRange{7, 7}));
  EXPECT_EQ(NeuronReplicaCores({2, 3}, 1, 0), (CoreRange{2, 3}));
}

TEST(NeuronRuntimeTest, VisibleCoresValueMergesRanges) {
  EXPECT_EQ(NeuronVisibleCoresValue({{2, 3}, {0, 1}}), "0-3");
  EXPECT_EQ(NeuronVisibleCoresValue({{4, 5}, {0, 1}}), "0-1,4-5");
  EXPECT_EQ(NeuronVisibleCoresValue({{1, 1}}), "1");
}

TEST(NeuronRuntimeTest, ConfiguresVisibleCoresOrChecksTheOperatorsValue) {
  unsetenv(kNeuronVisibleCoresEnv);
  ASSERT_TRUE(ConfigureNeuronVisibleCores({{0, 1}, {2, 3}}).ok());
  EXPECT_STREQ(std::getenv(kNeuronVisibleCoresEnv), "0-3");

  // Groups that leave a gap: the runtime refuses a non-contiguous list, so sluice does not write one.
  unsetenv(kNeuronVisibleCoresEnv);
  absl::Status gap = ConfigureNeuronVisibleCores({{0, 1}, {4, 5}});
  EXPECT_EQ(gap.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.message(), HasSubstr("(0-1,4-5) are not one contiguous range"));
  EXPECT_EQ(std::getenv(kNeuronVisibleCoresEnv), nullptr);

  setenv(kNeuronVisibleCoresEnv, "0-7", 1);  // set by the operator: kept when it covers what we need
  EXPECT_TRUE(ConfigureNeuronVisibleCores({{2, 3}}).ok());
  EXPECT_STREQ(std::getenv(kNeuronVisibleCoresEnv), "0-7");

  setenv(kNeuronVisibleCoresEnv, "0,1", 1);
  absl::Status status = ConfigureNeuronVisibleCores({{0, 3}});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(status.message(), HasSubstr("NEURON_RT_VISIBLE_CORES='0,1' is set but the config's instances need cores 0-3"));
  unsetenv(kNeuronVisibleCoresEnv);
}

TEST(NeuronRuntimeTest, NeuronInstanceWithoutTheLibraryFailsBeforeLoadingGraphs) {
  ModelConfig model;
  model.name = "m";
  model.inputs = {{"x", DataType::kFp32, {kVariableDim}, std::nullopt}};
  model.outputs = {{"y", DataType::kFp32, {4}, std::nullopt}};
  model.buckets = {{8}, {1}};
  model.directory = "/nonexistent/m";
  InstanceGroup group{1, DeviceKind::kNeuron, CoreRange{0, 0}, 1, "/nonexistent/libtorchneuron.so"};
  auto backend = Backend::Create({&model, group});
  ASSERT_FALSE(backend.ok());
  EXPECT_THAT(backend.status().message(), HasSubstr("libtorchneuron.so' could not be loaded"));
}

}  // namespace
}  // namespace sluice
