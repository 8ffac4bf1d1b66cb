// speech.stream_step (backend/base/stream_step_config.h): parsed values and errors naming the key.
#include <gtest/gtest.h>

#include "backend/base/stream_step_config.h"

namespace sluice {
namespace {

absl::StatusOr<StreamStepOptions> Parse(const std::string& text) {
  absl::StatusOr<YamlNode> node = YamlNode::LoadString(text, "config.yaml");
  if (!node.ok()) return node.status();
  return ParseStreamStepOptions(*node, 640);
}

TEST(StreamStepConfigTest, ParsesTheSection) {
  absl::StatusOr<StreamStepOptions> options = Parse(
      "{chunk_samples: 2560, slots: 8, batch_sizes: [1, 4, 8], states: [{name: kv, shape: [2, 32, 288]}], "
      "max_wait_ms: 10}");
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->chunk_samples, 2560);
  EXPECT_EQ(options->frames_per_chunk, 4);
  EXPECT_EQ(options->slots, 8);
  EXPECT_EQ(options->batch_sizes, (std::vector<int>{1, 4, 8}));
  ASSERT_EQ(options->states.size(), 1u);
  EXPECT_EQ(options->states[0].name, "kv");
  EXPECT_EQ(options->states[0].shape, (std::vector<int64_t>{2, 32, 288}));
  EXPECT_EQ(options->max_wait_ms, 10);
}

TEST(StreamStepConfigTest, RefusesWhatTheEngineCannotRun) {
  const std::string states = "states: [{name: kv, shape: [4]}]";
  for (const auto& [text, needle] : std::vector<std::pair<std::string, std::string>>{
           {"{chunk_samples: 1000, slots: 8, batch_sizes: [1], " + states + "}", "multiple of frame_samples"},
           {"{chunk_samples: 640, slots: 8, batch_sizes: [4, 2], " + states + "}", "ascending"},
           {"{chunk_samples: 640, slots: 8, batch_sizes: [16], " + states + "}", "between 1 and 8"},
           {"{chunk_samples: 640, slots: 8, batch_sizes: [1]}", "states"},
           {"{chunk_samples: 640, slots: 8, batch_sizes: [1], " + states + ", tick: 3}", "tick"}}) {
    absl::StatusOr<StreamStepOptions> options = Parse(text);
    ASSERT_FALSE(options.ok()) << text;
    EXPECT_NE(options.status().message().find(needle), std::string::npos) << options.status();
  }
}

}  // namespace
}  // namespace sluice
