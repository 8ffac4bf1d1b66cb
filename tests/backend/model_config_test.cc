// Config validation: a valid model config loads; each class of mistake fails naming file, key and line.
#include "backend/base/model_config.h"

#include <cstdio>
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sluice {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kValid[] = R"(name: asr_ctc
kind: speech
inputs:
  - {name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}
outputs:
  - {name: log_probs, dtype: FP32, shape: [-1, 29]}
buckets: {lengths: [16000, 32000], batch_sizes: [1, 2, 4]}
batching: {max_queue_delay_ms: 5, max_queue_size: 64}
instances: [{count: 2, device: cpu, intra_op_threads: 1}]
)";

absl::StatusOr<ModelConfig> Parse(const std::string& text) {
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(text, "repo/asr_ctc/config.yaml");
  if (!root.ok()) return root.status();
  return ParseModelConfig(*root, "repo/asr_ctc");
}

// Replaces the first occurrence of `from` in the valid config.
std::string ValidWith(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(ModelConfigTest, ValidConfigLoads) {
  absl::StatusOr<ModelConfig> config = Parse(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->name, "asr_ctc");
  EXPECT_EQ(config->kind, ModelKind::kSpeech);
  ASSERT_EQ(config->inputs.size(), 1u);
  EXPECT_EQ(config->inputs[0].sample_rate, 16000);
  EXPECT_EQ(config->outputs[0].shape, (std::vector<int64_t>{-1, 29}));
  EXPECT_TRUE(config->has_variable_output());
  EXPECT_EQ(config->buckets.lengths, (std::vector<int64_t>{16000, 32000}));
  EXPECT_EQ(config->max_batch_size(), 4);
  EXPECT_EQ(config->batching.max_queue_size, 64);
  ASSERT_EQ(config->instances.size(), 1u);
  EXPECT_EQ(config->instances[0].count, 2);
  EXPECT_EQ(config->GraphPath(2, 32000), "repo/asr_ctc/graphs/b2_l32000.pt");
}

TEST(ModelConfigTest, CpuGroupTakesCoresAndInterOpThreads) {
  absl::StatusOr<ModelConfig> config =
      Parse(ValidWith("intra_op_threads: 1", "intra_op_threads: 1, inter_op_threads: 1, cores: \"0-3\""));
  ASSERT_TRUE(config.ok()) << config.status();
  const InstanceGroup& group = config->instances[0];
  ASSERT_TRUE(group.cores.has_value());
  EXPECT_EQ(*group.cores, (CoreRange{0, 3}));
  EXPECT_EQ(group.inter_op_threads, 1);
  EXPECT_FALSE(Parse(kValid)->instances[0].inter_op_threads.has_value());
}

struct BadCase {
  const char* what;
  std::string text;
  const char* location;  // "line:col: key" expected in the message
  const char* message;
};

class BadModelConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadModelConfigTest, FailsNamingFileKeyAndLine) {
  absl::StatusOr<ModelConfig> config = Parse(GetParam().text);
  ASSERT_FALSE(config.ok()) << GetParam().what;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("repo/asr_ctc/config.yaml:")) << message;
  EXPECT_THAT(message, HasSubstr(GetParam().location)) << message;
  EXPECT_THAT(message, HasSubstr(GetParam().message)) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Classes, BadModelConfigTest,
    ::testing::Values(
        BadCase{"syntax", ValidWith("kind: speech", "kind: [speech"), ":", "YAML syntax error"},
        BadCase{"unknown top key", ValidWith("kind: speech", "kind: speech\nbuckts: {}"), "3:1: buckts",
                "unknown key 'buckts'"},
        BadCase{"missing key", ValidWith("kind: speech\n", ""), "1:1:", "missing required key 'kind'"},
        BadCase{"bad kind", ValidWith("kind: speech", "kind: video"), "2:7: kind", "unknown model kind 'video'"},
        BadCase{"name mismatch", ValidWith("name: asr_ctc", "name: other"), "1:7: name",
                "must match its directory name"},
        BadCase{"bad dtype", ValidWith("dtype: FP32, shape: [-1]", "dtype: F32, shape: [-1]"),
                "4:26: inputs[0].dtype", "unknown dtype 'F32'"},
        BadCase{"input without variable axis", ValidWith("shape: [-1], sample", "shape: [400], sample"),
                "inputs[0].shape", "needs a variable-length axis"},
        BadCase{"two variable axes", ValidWith("shape: [-1, 29]", "shape: [-1, -1]"), "6:43: outputs[0].shape",
                "at most one variable-length axis"},
        BadCase{"zero dim", ValidWith("shape: [-1, 29]", "shape: [-1, 0]"), "outputs[0].shape", "dimension 1 is 0"},
        BadCase{"duplicate tensor", ValidWith("outputs:\n", "outputs:\n  - {name: log_probs, dtype: FP32, shape: [3]}\n"),
                "7:5: outputs[1]", "duplicate name 'log_probs'"},
        BadCase{"speech without rate", ValidWith(", sample_rate: 16000", ""), "4:3: inputs",
                "needs sample_rate"},
        BadCase{"unsorted buckets", ValidWith("[16000, 32000]", "[32000, 16000]"), "7:20: buckets.lengths",
                "strictly ascending"},
        BadCase{"negative batch", ValidWith("[1, 2, 4]", "[1, -2, 4]"), "buckets.batch_sizes", "must be positive"},
        BadCase{"non-integer length", ValidWith("[16000, 32000]", "[16000, 3.5s]"), "buckets.lengths[1]",
                "expected an integer, got '3.5s'"},
        BadCase{"negative delay", ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: -1"),
                "batching.max_queue_delay_ms", "must be >= 0"},
        BadCase{"negative execution timeout",
                ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, execution_timeout_ms: -1"),
                "batching.execution_timeout_ms", "must be >= 0 and finite (0: no limit)"},
        BadCase{"negative fill wait",
                ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, max_fill_wait_ms: -3"),
                "batching.max_fill_wait_ms", "must be >= 0 and finite (0: off)"},
        BadCase{"idle_spin_us negative", ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, idle_spin_us: -1"),
                "batching.idle_spin_us", "between 0 (off) and 10000"},
        BadCase{"idle_spin_us too long",
                ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, idle_spin_us: 20000"),
                "batching.idle_spin_us", "between 0 (off) and 10000"},
        BadCase{"skip_futile_delay not a bool",
                ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, skip_futile_delay: sometimes"),
                "batching.skip_futile_delay", "expected true or false"},
        BadCase{"await_returns not a bool",
                ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, await_returns: 2"),
                "batching.await_returns", "expected true or false"},
        BadCase{"unknown batch size policy",
                ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, batch_size_policy: biggest"),
                "batching.batch_size_policy", "must be measured or largest, not 'biggest'"},
        BadCase{"unknown device", ValidWith("device: cpu", "device: tpu"), "9:32: instances[0].device",
                "unknown device 'tpu'"},
        BadCase{"zero count", ValidWith("count: 2", "count: 0"), "instances[0].count", "between 1 and 64"},
        BadCase{"neuron without cores", ValidWith("device: cpu", "device: neuron"), "instances[0]",
                "needs 'cores'"},
        BadCase{"malformed cores", ValidWith("device: cpu", "device: neuron, cores: \"3-1\""),
                "instances[0].cores", "malformed core range '3-1'"},
        BadCase{"uneven cores", ValidWith("device: cpu", "device: neuron, cores: \"0-2\""), "instances[0].cores",
                "3 cores cannot be split evenly over count 2"},
        BadCase{"cores on sim", ValidWith("device: cpu", "device: sim, cores: \"0\""), "instances[0].cores",
                "only supported for devices cpu (CPUs to pin to) and neuron"},
        BadCase{"uneven cpu cores", ValidWith("device: cpu", "device: cpu, cores: \"0-2\""), "instances[0].cores",
                "3 cores cannot be split evenly over count 2"},
        BadCase{"zero inter-op threads", ValidWith("intra_op_threads: 1", "intra_op_threads: 1, inter_op_threads: 0"),
                "instances[0].inter_op_threads", "must be between 1 and 256"},
        BadCase{"sim without cost model", ValidWith("device: cpu", "device: sim"), "9:12: instances",
                "needs a top-level 'sim:"},
        // Found by tests/fuzz/fuzz_model_config: values the fields' types or later arithmetic could not hold.
        BadCase{"NaN delay", ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: .nan"),
                "batching.max_queue_delay_ms", "must be >= 0 and finite"},
        BadCase{"queue size over int", ValidWith("max_queue_size: 64", "max_queue_size: 4294967296"),
                "batching.max_queue_size", "must be between 1 and 2147483647"},
        BadCase{"batch size over int", ValidWith("[1, 2, 4]", "[1, 2, 2147483648]"), "buckets.batch_sizes",
                "batch size 2147483648 is over 2147483647"},
        BadCase{"largest batch over int64 bytes", ValidWith("shape: [-1, 29]", "shape: [-1, 4294967296, 4294967296]"),
                "6:3: outputs", "tensor 'log_probs': its largest batch"},
        BadCase{"infinite sim cost", ValidWith("device: cpu", "device: sim") + "sim: {base_ms: .inf, per_sample_us: 0}\n",
                "sim.base_ms", "must be >= 0 and finite"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.what;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

TEST(ModelConfigTest, SimDeviceWithCostModelLoads) {
  absl::StatusOr<ModelConfig> config =
      Parse(ValidWith("device: cpu", "device: sim") + "sim: {base_ms: 3, per_sample_us: 0.01}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->sim.has_value());
  EXPECT_DOUBLE_EQ(config->sim->base_ms, 3);
  EXPECT_DOUBLE_EQ(config->sim->output_steps_per_input_step, 1.0);
}

// The 29-symbol speech section of asr_ctc's config (the voice API's vocabulary and frame rate).
std::string SpeechSection(const std::string& extra = "") {
  std::string vocabulary = "\"<blank>\"";
  for (char c = 'a'; c <= 'z'; ++c) vocabulary += std::string(", \"") + c + "\"";
  vocabulary += ", \" \", \"'\"";
  return "speech:\n  vocabulary: [" + vocabulary + "]\n  frame_samples: 640\n" + extra;
}

TEST(ModelConfigTest, SpeechSectionLoadsWithDefaults) {
  absl::StatusOr<ModelConfig> config = Parse(std::string(kValid) + SpeechSection());
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->speech.has_value());
  EXPECT_EQ(config->speech->vocabulary.size(), 29u);
  EXPECT_EQ(config->speech->vocabulary[27], " ");
  EXPECT_EQ(config->speech->output, "log_probs");
  EXPECT_EQ(config->speech_output().name, "log_probs");
  EXPECT_EQ(config->speech->streaming.step_ms, 480);
  EXPECT_DOUBLE_EQ(config->speech->max_audio_seconds, 3600);
  // The default 2 s overlap is shortened to a quarter of the largest bucket (2 s here): 500 ms.
  EXPECT_EQ(config->speech->long_audio_overlap_ms, 500);
}

TEST(ModelConfigTest, SpeechSectionMistakesNameTheKey) {
  const auto error = [](const std::string& text) { return Parse(text).status().ToString(); };
  EXPECT_THAT(error(std::string(kValid) + SpeechSection("  long_audio_overlap_ms: 1000\n")),
              HasSubstr("shorter than the largest bucket"));
  EXPECT_THAT(error(std::string(kValid) + SpeechSection("  output: nope\n")), HasSubstr("no output named 'nope'"));
  EXPECT_THAT(error(ValidWith("shape: [-1, 29]", "shape: [-1, 30]") + SpeechSection()),
              HasSubstr("must be FP32 with shape [-1, 29]"));
  std::string generic = ValidWith("kind: speech", "kind: generic");
  generic.erase(generic.find(", sample_rate: 16000"), std::string(", sample_rate: 16000").size());
  EXPECT_THAT(error(generic + SpeechSection()), HasSubstr("only allowed on kind: speech"));
  EXPECT_THAT(error(std::string(kValid) + "speech: {vocabulary: [\"<blank>\", \"a\"]}\n"),
              HasSubstr("frame_samples"));
  EXPECT_THAT(error(std::string(kValid) + SpeechSection("  streaming: {step_ms: 5}\n")),
              HasSubstr("speech.streaming.step_ms"));
  EXPECT_THAT(error(std::string(kValid) + SpeechSection("  max_audio_seconds: 0\n")),
              HasSubstr("must be > 0 and at most 86400"));
}

TEST(ModelConfigTest, SimFaultsParseAndAreChecked) {
  const std::string sim = ValidWith("device: cpu", "device: sim");
  absl::StatusOr<ModelConfig> config =
      Parse(sim + "sim: {base_ms: 1, per_sample_us: 0, faults: {error_rate: 0.1, exception_rate: 0.2, "
                  "gone_after_batches: 9, seed: 3}}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->sim->faults.error_rate, 0.1);
  EXPECT_DOUBLE_EQ(config->sim->faults.exception_rate, 0.2);
  EXPECT_EQ(config->sim->faults.gone_after_batches, 9);
  EXPECT_EQ(config->sim->faults.seed, 3u);
  EXPECT_THAT(Parse(sim + "sim: {base_ms: 1, per_sample_us: 0, faults: {error_rate: 1.5}}\n").status().ToString(),
              HasSubstr("probability"));
  EXPECT_THAT(Parse(sim + "sim: {base_ms: 1, per_sample_us: 0, faults: {error_rate: 0.6, exception_rate: 0.6}}\n")
                  .status().ToString(),
              HasSubstr("<= 1"));
  EXPECT_THAT(Parse(sim + "sim: {base_ms: 1, per_sample_us: 0, faults: {hang: 1}}\n").status().ToString(),
              HasSubstr("hang"));
  absl::StatusOr<ModelConfig> hanging =
      Parse(sim + "sim: {base_ms: 1, per_sample_us: 0, faults: {hang_after_batches: 4, hang_ms: 250, replica: 1}}\n");
  ASSERT_TRUE(hanging.ok()) << hanging.status();
  EXPECT_EQ(hanging->sim->faults.hang_after_batches, 4);
  EXPECT_DOUBLE_EQ(hanging->sim->faults.hang_ms, 250);
  EXPECT_EQ(hanging->sim->faults.replica, 1);
  EXPECT_FALSE(config->sim->faults.replica.has_value());  // unset: every replica
  EXPECT_THAT(Parse(sim + "sim: {base_ms: 1, per_sample_us: 0, faults: {replica: -1}}\n").status().ToString(),
              HasSubstr("must be a replica index"));
}

TEST(ModelConfigTest, ExecutionTimeoutDefaultsToAMinuteAndZeroMeansNoLimit) {
  absl::StatusOr<ModelConfig> config = Parse(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_DOUBLE_EQ(config->batching.execution_timeout_ms, 60000);
  absl::StatusOr<ModelConfig> off =
      Parse(ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, execution_timeout_ms: 0"));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_DOUBLE_EQ(off->batching.execution_timeout_ms, 0);
}

TEST(ModelConfigTest, PicksTokensIsForGenerationModelsOnly) {
  absl::StatusOr<ModelConfig> config = Parse(ValidWith("device: cpu, intra_op_threads: 1", "device: sim") +
                                             "sim: {base_ms: 1, per_sample_us: 1, picks_tokens: true}\n");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()),
              AllOf(HasSubstr("sim.picks_tokens"), HasSubstr("applies to kind: generation models only")));
}

TEST(ModelConfigTest, IdleSpinIs200UsByDefaultAndCanBeTurnedOff) {
  absl::StatusOr<ModelConfig> config = Parse(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->batching.idle_spin_us, 200);
  absl::StatusOr<ModelConfig> off = Parse(ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, idle_spin_us: 0"));
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_EQ(off->batching.idle_spin_us, 0);
}

// The batching rules that act by default (skip_futile_delay, await_returns, the fill rule: unset, so its device
// default), each turned off by its own setting without touching the others.
TEST(ModelConfigTest, BatchingRulesAreOnByDefaultAndEachCanBeTurnedOff) {
  absl::StatusOr<ModelConfig> config = Parse(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->batching.skip_futile_delay);
  EXPECT_TRUE(config->batching.await_returns);
  EXPECT_FALSE(config->batching.max_fill_wait_ms.has_value());
  struct Off {
    std::string setting;
    bool skip_futile_delay, await_returns;
    std::optional<double> max_fill_wait_ms;
  };
  for (const Off& off : {Off{"skip_futile_delay: false", false, true, std::nullopt},
                         Off{"await_returns: false", true, false, std::nullopt},
                         Off{"max_fill_wait_ms: 0", true, true, 0}}) {
    absl::StatusOr<ModelConfig> turned =
        Parse(ValidWith("max_queue_delay_ms: 5", "max_queue_delay_ms: 5, " + off.setting));
    ASSERT_TRUE(turned.ok()) << off.setting << ": " << turned.status();
    EXPECT_EQ(turned->batching.skip_futile_delay, off.skip_futile_delay) << off.setting;
    EXPECT_EQ(turned->batching.await_returns, off.await_returns) << off.setting;
    EXPECT_EQ(turned->batching.max_fill_wait_ms, off.max_fill_wait_ms) << off.setting;
  }
}

// Unset, the fill rule's wait is 150 ms on accelerators and off wherever a CPU instance serves the model (measured
// there: longer waits, nothing more served); a configured value holds on any device.
TEST(ModelConfigTest, FillWaitDefaultsByDeviceAndAConfiguredValueHolds) {
  ModelConfig model;
  for (DeviceKind device : {DeviceKind::kSim, DeviceKind::kCuda, DeviceKind::kNeuron}) {
    model.instances = {{1, device}};
    EXPECT_EQ(FillWaitMs(model), 150);
  }
  model.instances = {{1, DeviceKind::kCpu}};
  EXPECT_EQ(FillWaitMs(model), 0);
  model.instances = {{1, DeviceKind::kSim}, {1, DeviceKind::kCpu}};
  EXPECT_EQ(FillWaitMs(model), 0);
  model.batching.max_fill_wait_ms = 40;
  EXPECT_EQ(FillWaitMs(model), 40);
  model.instances = {{1, DeviceKind::kSim}};
  model.batching.max_fill_wait_ms = 0;
  EXPECT_EQ(FillWaitMs(model), 0);
}

TEST(ModelConfigTest, MissingFileNamesThePath) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig("/nonexistent/model");
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().message(), HasSubstr("/nonexistent/model/config.yaml"));
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// A text embedder like the exported all-MiniLM-L6-v2 (backend/compile/bert_embed.py), its tokenizer at `tokenizer`.
std::string EmbeddingConfig(const std::string& tokenizer, const std::string& section_extra = "",
                            const std::string& outputs = "  - {name: embedding, dtype: FP32, shape: [384]}\n") {
  return "name: asr_ctc\nkind: text\ninputs:\n  - {name: input_ids, dtype: INT64, shape: [-1], range: [0, 30521]}\n"
         "outputs:\n" + outputs + "buckets: {lengths: [16, 256], batch_sizes: [1, 4]}\n"
         "instances: [{count: 1, device: cpu}]\nembedding:\n  tokenizer: " + tokenizer + "\n" + section_extra;
}

class EmbeddingSectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokenizer_ = ::testing::TempDir() + "/model_config_test_tokenizer.json";
    std::FILE* file = std::fopen(tokenizer_.c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fputs("{}", file);
    std::fclose(file);
  }
  void TearDown() override { std::remove(tokenizer_.c_str()); }
  std::string tokenizer_;
};

TEST_F(EmbeddingSectionTest, LoadsWithTheFirstOutputByDefault) {
  absl::StatusOr<ModelConfig> config = Parse(EmbeddingConfig(tokenizer_));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->embedding.has_value());
  EXPECT_EQ(config->embedding->tokenizer_path,
            std::filesystem::path(tokenizer_).lexically_normal().string());
  EXPECT_EQ(config->embedding->output, "embedding");
  EXPECT_EQ(config->embedding_output().shape, (std::vector<int64_t>{384}));
}

TEST_F(EmbeddingSectionTest, MistakesNameTheKey) {
  const auto error = [](const std::string& text) { return Parse(text).status().ToString(); };
  EXPECT_THAT(error(EmbeddingConfig("/nonexistent/tokenizer.json")), HasSubstr("does not exist"));
  EXPECT_THAT(error(EmbeddingConfig(tokenizer_, "  output: nope\n")), HasSubstr("no output named 'nope'"));
  EXPECT_THAT(error(EmbeddingConfig(tokenizer_, "  pooling: mean\n")), HasSubstr("pooling"));
  EXPECT_THAT(error(EmbeddingConfig(tokenizer_, "", "  - {name: embedding, dtype: FP32, shape: [-1, 384]}\n")),
              HasSubstr("must be FP32 with a fixed shape [dims]"));
  std::string generic = EmbeddingConfig(tokenizer_);
  generic.replace(generic.find("kind: text"), std::string("kind: text").size(), "kind: generic");
  EXPECT_THAT(error(generic), HasSubstr("only allowed on kind: text"));
  std::string floats = EmbeddingConfig(tokenizer_);
  const std::string ids = "dtype: INT64, shape: [-1], range: [0, 30521]";
  floats.replace(floats.find(ids), ids.size(), "dtype: FP32, shape: [-1]");
  EXPECT_THAT(error(floats), HasSubstr("the token ids, INT64 with shape [-1]"));
}

}  // namespace
}  // namespace sluice
