// SharedTorchWeights hands every caller the very same tensors (same data pointers) while any holds them, so every
// graph and replica binds one copy; the copy goes when its last holder does. Includes libtorch (torch_weights.h)
// to look at the data pointers themselves.
#include "backend/torch_weights.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "backend/base/model_config.h"
#include "tests/backend/test_models.h"

namespace sluice {
namespace {

TEST(SharedTorchWeightsTest, CallersShareTheSameTensorsUntilTheLastLetsGo) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(testing::ExampleModelDir("text_embed"));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(GraphFormatOf(*config), 2);
  TorchTarget target;
  auto a = SharedTorchWeights(*config, target);
  auto b = SharedTorchWeights(*config, target);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ((*a)->tensors.size(), (*b)->tensors.size());
  ASSERT_FALSE((*a)->tensors.empty());
  int64_t bytes = 0;
  for (size_t i = 0; i < (*a)->tensors.size(); ++i) {
    EXPECT_EQ((*a)->tensors[i].data_ptr(), (*b)->tensors[i].data_ptr()) << "tensor " << i;
    bytes += static_cast<int64_t>((*a)->tensors[i].nbytes());
  }
  EXPECT_EQ((*a)->bytes, bytes);
  const std::string id = (*a)->id;
  const size_t count = (*a)->tensors.size();
  std::weak_ptr<const TorchWeights> watch = *a;
  a->reset();
  b->reset();
  // Released by both: the copy is gone (the registry keeps no weights alive by itself); the next caller loads anew.
  EXPECT_TRUE(watch.expired());
  auto c = SharedTorchWeights(*config, target);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->id, id);
  EXPECT_EQ((*c)->tensors.size(), count);
}

}  // namespace
}  // namespace sluice
