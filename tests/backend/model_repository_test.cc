#include "backend/model_repository.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "tests/backend/test_models.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(ModelRepositoryTest, ListsTheExampleModels) {
  absl::StatusOr<std::vector<std::string>> dirs = ListModelDirectories(testing::ExampleModelsDir());
  ASSERT_TRUE(dirs.ok()) << dirs.status();
  // Sorted by name: the random-weight recognizer, its cache-aware streaming twin, the trained digits recognizer,
  // its trained cache-aware twin, the example LLM, the text encoder.
  ASSERT_EQ(dirs->size(), 6u);
  EXPECT_THAT((*dirs)[0], ::testing::EndsWith("/asr_ctc"));
  EXPECT_THAT((*dirs)[1], ::testing::EndsWith("/asr_ctc_stream"));
  EXPECT_THAT((*dirs)[2], ::testing::EndsWith("/asr_digits"));
  EXPECT_THAT((*dirs)[3], ::testing::EndsWith("/asr_digits_stream"));
  EXPECT_THAT((*dirs)[4], ::testing::EndsWith("/llama_tiny"));
  EXPECT_THAT((*dirs)[5], ::testing::EndsWith("/text_embed"));
}

TEST(ModelRepositoryTest, LoadsOnlyTheRequestedModelWithItsInstances) {
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository =
      ModelRepository::Load({testing::ExampleModelsDir(), {"text_embed"}, 1});
  ASSERT_TRUE(repository.ok()) << repository.status();
  ASSERT_EQ((*repository)->models().size(), 1u);
  const LoadedModel* model = (*repository)->Find("text_embed");
  ASSERT_NE(model, nullptr);
  int expected_instances = 0;
  for (const InstanceGroup& group : model->config->instances) expected_instances += group.count;
  EXPECT_EQ(static_cast<int>(model->instances.size()), expected_instances);
  EXPECT_GT(model->load_seconds, 0);
  EXPECT_EQ((*repository)->Find("asr_ctc"), nullptr);
}

TEST(ModelRepositoryTest, MissingOrEmptyRepositoryIsAnError) {
  auto missing = ModelRepository::Load({"/nonexistent/repo"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("'/nonexistent/repo' is not a directory"));

  const auto empty = std::filesystem::temp_directory_path() / ("sluice_empty_repo_" + std::to_string(::getpid()));
  std::filesystem::create_directories(empty);
  auto none = ModelRepository::Load({empty.string()});
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("holds no model"));

  auto unknown = ModelRepository::Load({testing::ExampleModelsDir(), {"nope"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("holds no model named nope"));
}

}  // namespace
}  // namespace sluice
