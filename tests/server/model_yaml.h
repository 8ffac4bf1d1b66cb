// Test helper: model configs from YAML text for the in-process front-end tests, and the `tagger` model they share.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backend/base/model_config.h"
#include "tests/server/tagger_yaml.h"

namespace sluice::testing {

// A model's config.yaml text parsed into a ModelConfig; a parse error fails the calling test.
inline ModelConfig ParseModelYaml(const std::string& yaml) {
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(yaml, "test.yaml");
  EXPECT_TRUE(root.ok()) << root.status();
  absl::StatusOr<ModelConfig> model = ParseModelConfig(*root, "");
  EXPECT_TRUE(model.ok()) << model.status();
  return *model;
}

inline ModelConfig TaggerModel() { return ParseModelYaml(kTaggerYaml); }

}  // namespace sluice::testing
