// The generation: section of a kind: generation model (backend/base/generation_config.h): a valid config loads
// with its defaults; each class of mistake fails naming the file, the key and the line; the bucket models' keys
// and the generation section never mix.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/base/model_config.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

constexpr char kValid[] = R"(name: tiny_llm
kind: generation
generation:
  tokenizer: tokenizer.model
  vocab_size: 2000
  context_length: 1024
  kv_cache: {slots: 16, layers: 4, kv_heads: 2, head_dim: 32}
  prefill_lengths: [64, 128, 256, 512, 1024]
  decode_batch_sizes: [1, 2, 4, 8, 16]
  kv_lengths: [256, 512, 1024]
  bos_token_id: 1
  eos_token_id: 2
  max_num_seqs: 12
  prefill_token_budget: 2048
  max_queue_size: 64
  default_max_tokens: 100
  chat_template: {system: "S: ", user: "U: ", assistant: "A: ", separator: "\n\n"}
instances: [{count: 1, device: cpu, intra_op_threads: 1}]
)";

// <temp>/generation_config_test/tiny_llm holding an (empty) tokenizer.model: the section checks that it exists.
const std::string& ModelDir() {
  static const std::string* dir = [] {
    const std::filesystem::path path = std::filesystem::path(::testing::TempDir()) / "generation_config_test" /
                                       "tiny_llm";
    std::filesystem::create_directories(path);
    std::ofstream(path / "tokenizer.model") << "not a real SentencePiece model";
    return new std::string(path.string());
  }();
  return *dir;
}

absl::StatusOr<ModelConfig> Parse(const std::string& text) {
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(text, "repo/tiny_llm/config.yaml");
  if (!root.ok()) return root.status();
  return ParseModelConfig(*root, ModelDir());
}

// Replaces the first occurrence of `from` in the valid config.
std::string ValidWith(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

// The valid config without the line holding `key` (a generation: key with its default).
std::string ValidWithout(const std::string& key) {
  std::string text = kValid;
  const size_t at = text.find("  " + key + ":");
  EXPECT_NE(at, std::string::npos) << key;
  return text.erase(at, text.find('\n', at) - at + 1);
}

TEST(GenerationConfigTest, ValidConfigLoads) {
  absl::StatusOr<ModelConfig> config = Parse(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kind, ModelKind::kGeneration);
  EXPECT_STREQ(ModelKindName(config->kind), "generation");
  EXPECT_TRUE(config->inputs.empty());
  EXPECT_TRUE(config->outputs.empty());
  EXPECT_TRUE(config->buckets.lengths.empty());
  ASSERT_TRUE(config->generation.has_value());
  const GenerationOptions& g = *config->generation;
  EXPECT_EQ(g.tokenizer_path, (std::filesystem::absolute(ModelDir()) / "tokenizer.model").lexically_normal());
  EXPECT_EQ(g.vocab_size, 2000);
  EXPECT_EQ(g.context_length, 1024);
  EXPECT_EQ(g.kv_cache.slots, 16);
  EXPECT_EQ(g.kv_cache.layers, 4);
  EXPECT_EQ(g.kv_cache.kv_heads, 2);
  EXPECT_EQ(g.kv_cache.head_dim, 32);
  EXPECT_EQ(g.prefill_lengths, (std::vector<int64_t>{64, 128, 256, 512, 1024}));
  EXPECT_EQ(g.decode_batch_sizes, (std::vector<int>{1, 2, 4, 8, 16}));
  EXPECT_EQ(g.kv_lengths, (std::vector<int64_t>{256, 512, 1024}));
  EXPECT_EQ(g.bos_token_id, 1);
  EXPECT_EQ(g.eos_token_id, 2);
  EXPECT_EQ(g.max_num_seqs, 12);
  EXPECT_EQ(g.prefill_token_budget, 2048);
  EXPECT_EQ(g.max_queue_size, 64);
  EXPECT_EQ(g.default_max_tokens, 100);
  EXPECT_EQ(g.execution_timeout_ms, 60000);  // the default, as batching.execution_timeout_ms
  EXPECT_EQ(g.chat_template.system, "S: ");
  EXPECT_EQ(g.chat_template.assistant, "A: ");
  EXPECT_EQ(g.chat_template.separator, "\n\n");
  EXPECT_EQ(g.max_prompt_length(), 1024);
  EXPECT_EQ(g.max_decode_batch(), 16);
}

TEST(GenerationConfigTest, EosTokenIdMayListSeveralIds) {
  std::string text = kValid;
  text.replace(text.find("eos_token_id: 2"), 15, "eos_token_id: [2, 7, 9]");
  absl::StatusOr<ModelConfig> config = Parse(text);
  ASSERT_TRUE(config.ok()) << config.status();
  const GenerationOptions& g = *config->generation;
  EXPECT_EQ(g.eos_token_id, 2);
  EXPECT_EQ(g.extra_eos_token_ids, (std::vector<int>{7, 9}));
  EXPECT_TRUE(g.IsEos(2));
  EXPECT_TRUE(g.IsEos(9));
  EXPECT_FALSE(g.IsEos(3));
}

TEST(GenerationConfigTest, ChunkedPrefillKeysParseAndDefault) {
  absl::StatusOr<ModelConfig> off = Parse(kValid);
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->generation->chunked_prefill());

  absl::StatusOr<ModelConfig> on =
      Parse(ValidWith("max_queue_size: 64", "max_queue_size: 64\n  prefill_chunk_lengths: [32, 128]"));
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->generation->chunked_prefill());
  EXPECT_EQ(on->generation->prefill_chunk_lengths, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(on->generation->iteration_token_budget, 12 + 128);  // max_num_seqs + the largest chunk
  EXPECT_TRUE(on->generation->decode_first);

  absl::StatusOr<ModelConfig> set = Parse(ValidWith(
      "max_queue_size: 64",
      "max_queue_size: 64\n  prefill_chunk_lengths: [64]\n  iteration_token_budget: 80\n  decode_first: false"));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->generation->iteration_token_budget, 80);
  EXPECT_FALSE(set->generation->decode_first);
}

TEST(GenerationConfigTest, OptionalKeysTakeTheirDefaults) {
  std::string text = kValid;
  for (const char* key : {"bos_token_id", "eos_token_id", "max_num_seqs", "prefill_token_budget", "max_queue_size",
                          "default_max_tokens", "chat_template"}) {
    const size_t at = text.find(std::string("  ") + key + ":");
    text.erase(at, text.find('\n', at) - at + 1);
  }
  text.replace(text.find("slots: 16"), 9, "slots: 6");
  absl::StatusOr<ModelConfig> config = Parse(text);
  ASSERT_TRUE(config.ok()) << config.status();
  const GenerationOptions& g = *config->generation;
  EXPECT_EQ(g.bos_token_id, -1);
  EXPECT_EQ(g.eos_token_id, -1);
  EXPECT_EQ(g.max_num_seqs, 6);  // min(slots, largest decode batch)
  EXPECT_EQ(g.prefill_token_budget, 1024);  // the largest prompt bucket
  EXPECT_EQ(g.max_queue_size, 256);
  EXPECT_EQ(g.default_max_tokens, 128);
  EXPECT_EQ(g.chat_template.user, ChatTemplate{}.user);

  // A short context caps the default max_tokens below it.
  std::string short_context = ValidWithout("default_max_tokens");
  for (auto [from, to] : {std::pair{"context_length: 1024", "context_length: 64"},
                          {"[64, 128, 256, 512, 1024]", "[32, 64]"},
                          {"[256, 512, 1024]", "[64]"}}) {
    short_context.replace(short_context.find(from), std::string(from).size(), to);
  }
  config = Parse(short_context);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->generation->default_max_tokens, 63);
}

TEST(GenerationConfigTest, SimDeviceTakesTheCostModel) {
  absl::StatusOr<ModelConfig> config =
      Parse(ValidWith("device: cpu, intra_op_threads: 1", "device: sim") + "sim: {base_ms: 2, per_sample_us: 5}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->sim.has_value());
  EXPECT_DOUBLE_EQ(config->sim->per_sample_us, 5);
  EXPECT_FALSE(config->sim->picks_tokens);
  config = Parse(ValidWith("device: cpu, intra_op_threads: 1", "device: sim") +
                 "sim: {base_ms: 2, per_sample_us: 5, picks_tokens: true}\n");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->sim->picks_tokens);
}

struct BadCase {
  const char* what;
  std::string text;
  const char* location;  // "line:col: key" expected in the message
  const char* message;
};

class BadGenerationConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadGenerationConfigTest, FailsNamingFileKeyAndLine) {
  absl::StatusOr<ModelConfig> config = Parse(GetParam().text);
  ASSERT_FALSE(config.ok()) << GetParam().what;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(config.status().message());
  EXPECT_THAT(message, HasSubstr("repo/tiny_llm/config.yaml:")) << message;
  EXPECT_THAT(message, HasSubstr(GetParam().location)) << message;
  EXPECT_THAT(message, HasSubstr(GetParam().message)) << message;
}

const std::string kSimDevice = ValidWith("device: cpu, intra_op_threads: 1", "device: sim");

INSTANTIATE_TEST_SUITE_P(
    Classes, BadGenerationConfigTest,
    ::testing::Values(
        // Sections that do not mix.
        BadCase{"missing section", ValidWith("generation:\n", "generatio:\n"), "3:1: generatio",
                "unknown key 'generatio'"},
        BadCase{"no section", std::string("name: tiny_llm\nkind: generation\ninstances: [{device: cpu}]\n"), "1:1:",
                "missing required key 'generation'"},
        BadCase{"inputs on generation", std::string(kValid) + "inputs: [{name: ids, dtype: INT64, shape: [-1]}]\n",
                "19:9: inputs", "inputs is not allowed on kind: generation"},
        BadCase{"buckets on generation", std::string(kValid) + "buckets: {lengths: [8], batch_sizes: [1]}\n",
                "19:10: buckets", "buckets is not allowed on kind: generation"},
        BadCase{"batching on generation", std::string(kValid) + "batching: {max_queue_size: 4}\n", "19:11: batching",
                "batching is not allowed on kind: generation"},
        BadCase{"speech on generation", std::string(kValid) + "speech: {frame_samples: 1}\n", "19:9: speech",
                "speech is not allowed on kind: generation"},
        BadCase{"generation on text", ValidWith("kind: generation", "kind: text"), "4:3: generation",
                "generation is only allowed on kind: generation models"},
        BadCase{"ratio on generation sim", kSimDevice + "sim: {base_ms: 1, per_sample_us: 1, "
                                                        "output_steps_per_input_step: 2}\n",
                "sim.output_steps_per_input_step", "has no meaning for kind: generation"},
        BadCase{"picks_tokens not a bool", kSimDevice + "sim: {base_ms: 1, per_sample_us: 1, picks_tokens: maybe}\n",
                "sim.picks_tokens", "expected true or false"},
        // Keys of the section.
        BadCase{"unknown key", ValidWith("  vocab_size", "  vocab_sise"), "5:3: generation.vocab_sise",
                "unknown key 'vocab_sise'"},
        BadCase{"missing key", ValidWithout("vocab_size"), "generation", "missing required key 'vocab_size'"},
        BadCase{"tokenizer missing", ValidWith("tokenizer.model", "missing.model"), "4:14: generation.tokenizer",
                "missing.model' does not exist"},
        BadCase{"zero vocab", ValidWith("vocab_size: 2000", "vocab_size: 0"), "5:15: generation.vocab_size",
                "must be between 1 and"},
        BadCase{"negative context", ValidWith("context_length: 1024", "context_length: -5"),
                "6:19: generation.context_length", "must be between 2 and"},
        BadCase{"zero slots", ValidWith("slots: 16", "slots: 0"), "7:21: generation.kv_cache.slots",
                "must be between 1 and 4096"},
        BadCase{"unknown cache key", ValidWith("head_dim: 32", "head_dim: 32, heads: 2"),
                "generation.kv_cache.heads", "unknown key 'heads'"},
        BadCase{"cache over int64 bytes",
                ValidWith("layers: 4, kv_heads: 2, head_dim: 32", "layers: 65536, kv_heads: 65536, head_dim: 65536"),
                "7:13: generation.kv_cache", "too large"},
        BadCase{"unsorted prompt buckets", ValidWith("[64, 128, 256, 512, 1024]", "[128, 64, 256, 512, 1024]"),
                "8:20: generation.prefill_lengths", "strictly ascending"},
        BadCase{"duplicate batch sizes", ValidWith("[1, 2, 4, 8, 16]", "[1, 2, 2, 8, 16]"),
                "9:23: generation.decode_batch_sizes", "strictly ascending (and unique)"},
        BadCase{"zero batch size", ValidWith("[1, 2, 4, 8, 16]", "[0, 2, 4, 8, 16]"),
                "9:23: generation.decode_batch_sizes", "value 0 must be between 1 and"},
        BadCase{"empty KV lengths", ValidWith("[256, 512, 1024]", "[]"), "10:15: generation.kv_lengths",
                "at least one value"},
        BadCase{"last KV length is not the context", ValidWith("[256, 512, 1024]", "[256, 512]"),
                "10:15: generation.kv_lengths", "last KV length (512) must equal context_length (1024)"},
        BadCase{"prompt bucket over the context", ValidWith("[64, 128, 256, 512, 1024]", "[64, 2048]"),
                "8:20: generation.prefill_lengths", "largest prompt bucket (2048) is over context_length (1024)"},
        BadCase{"bos out of vocabulary", ValidWith("bos_token_id: 1", "bos_token_id: 2000"),
                "11:17: generation.bos_token_id", "must be a token id in [0, vocab_size 2000) or -1"},
        BadCase{"eos below -1", ValidWith("eos_token_id: 2", "eos_token_id: -2"), "12:17: generation.eos_token_id",
                "must be a token id"},
        BadCase{"eos list with -1", ValidWith("eos_token_id: 2", "eos_token_id: [2, -1]"),
                "12:17: generation.eos_token_id", "must be a token id in [0, vocab_size 2000)"},
        BadCase{"empty eos list", ValidWith("eos_token_id: 2", "eos_token_id: []"), "12:17: generation.eos_token_id",
                "non-empty list"},
        BadCase{"zero max_num_seqs", ValidWith("max_num_seqs: 12", "max_num_seqs: 0"),
                "13:17: generation.max_num_seqs", "must be between 1 and"},
        BadCase{"max_num_seqs over slots", ValidWith("slots: 16", "slots: 8"), "13:17: generation.max_num_seqs",
                "must be at most kv_cache.slots (8)"},
        BadCase{"max_num_seqs over the largest decode batch", ValidWith("[1, 2, 4, 8, 16]", "[1, 2, 4, 8]"),
                "13:17: generation.max_num_seqs", "the largest decode batch size (8)"},
        BadCase{"budget below the largest prompt", ValidWith("prefill_token_budget: 2048", "prefill_token_budget: 512"),
                "14:25: generation.prefill_token_budget", "at least the largest prompt bucket (1024)"},
        BadCase{"zero queue", ValidWith("max_queue_size: 64", "max_queue_size: 0"),
                "15:19: generation.max_queue_size", "must be between 1 and"},
        BadCase{"default max_tokens fills the context",
                ValidWith("default_max_tokens: 100", "default_max_tokens: 1024"),
                "16:23: generation.default_max_tokens", "must be below context_length (1024)"},
        BadCase{"negative execution timeout",
                ValidWith("default_max_tokens: 100", "default_max_tokens: 100\n  execution_timeout_ms: -1"),
                "17:25: generation.execution_timeout_ms", "must be a finite number of milliseconds >= 0"},
        BadCase{"chunk over the smallest KV length",
                ValidWith("max_queue_size: 64", "max_queue_size: 64\n  prefill_chunk_lengths: [128, 512]"),
                "16:26: generation.prefill_chunk_lengths", "largest chunk (512) is over the smallest KV length (256)"},
        BadCase{"chunks not ascending",
                ValidWith("max_queue_size: 64", "max_queue_size: 64\n  prefill_chunk_lengths: [128, 64]"),
                "16:26: generation.prefill_chunk_lengths", "strictly ascending"},
        BadCase{"iteration budget without chunks",
                ValidWith("max_queue_size: 64", "max_queue_size: 64\n  iteration_token_budget: 100"),
                "16:27: generation.iteration_token_budget", "applies to chunked prefill only"},
        BadCase{"decode_first without chunks",
                ValidWith("max_queue_size: 64", "max_queue_size: 64\n  decode_first: false"),
                "16:17: generation.decode_first", "applies to chunked prefill only"},
        BadCase{"zero iteration budget",
                ValidWith("max_queue_size: 64",
                          "max_queue_size: 64\n  prefill_chunk_lengths: [64]\n  iteration_token_budget: 0"),
                "17:27: generation.iteration_token_budget", "must be between 1 and"},
        BadCase{"prefix cache without chunks",
                ValidWith("max_queue_size: 64", "max_queue_size: 64\n  prefix_cache_block_size: 64"),
                "16:28: generation.prefix_cache_block_size", "applies to chunked prefill only"},
        BadCase{"prefix cache block not dividing the context",
                ValidWith("max_queue_size: 64",
                          "max_queue_size: 64\n  prefill_chunk_lengths: [64]\n  prefix_cache_block_size: 48"),
                "17:28: generation.prefix_cache_block_size", "must divide context_length (1024)"},
        BadCase{"negative prefix cache block",
                ValidWith("max_queue_size: 64",
                          "max_queue_size: 64\n  prefill_chunk_lengths: [64]\n  prefix_cache_block_size: -1"),
                "17:28: generation.prefix_cache_block_size", "must be between 0 and 1024"},
        BadCase{"unknown chat template key", ValidWith("separator:", "seperator:"),
                "generation.chat_template.seperator", "unknown key 'seperator'"},
        BadCase{"chat template not a map", ValidWith("{system: \"S: \", user: \"U: \", assistant: \"A: \", separator: "
                                                     "\"\\n\\n\"}",
                                                     "[a, b]"),
                "17:18: generation.chat_template", "expected a map"}),
    [](const ::testing::TestParamInfo<BadCase>& info) {
      std::string name = info.param.what;
      for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      return name;
    });

}  // namespace
}  // namespace sluice
