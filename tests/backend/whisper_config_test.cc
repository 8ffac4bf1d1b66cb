// An encoder-decoder speech model's config.yaml (Whisper; backend/base/speech_config.h, generation_config.h): a
// valid one loads as kind speech with its encoder buckets, its whisper ids and its decoder's cross_attention; each
// mistake fails naming the file, the key and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "backend/base/model_config.h"

namespace sluice {
namespace {

using ::testing::HasSubstr;

constexpr char kValid[] = R"(name: whisper_tiny
kind: speech
inputs: [{name: audio, dtype: FP32, shape: [-1], sample_rate: 16000}]
outputs: [{name: encoder_hidden, dtype: FP32, shape: [1500, 64]}]
buckets: {lengths: [480000], batch_sizes: [1, 4]}
instances: [{count: 1, device: cpu, intra_op_threads: 1}]
speech:
  recognizer: whisper
  output: encoder_hidden
  max_audio_seconds: 90
  whisper:
    start_token_id: 900
    transcribe_token_id: 950
    no_timestamps_token_id: 960
    languages: ["en", "de", "no"]
    language_token_ids: [901, 902, 903]
    suppress_tokens: [1, 2]
    begin_suppress_tokens: [220, 899]
generation:
  tokenizer: tokenizer.json
  vocab_size: 1000
  context_length: 448
  kv_cache: {slots: 4, layers: 2, kv_heads: 2, head_dim: 32}
  cross_attention: {encoder_positions: 1500, encoder_hidden: 64}
  prefill_lengths: [8]
  decode_batch_sizes: [1, 4]
  kv_lengths: [64, 448]
  eos_token_id: 899
)";

const std::string& ModelDir() {
  static const std::string* dir = [] {
    const std::filesystem::path path =
        std::filesystem::path(::testing::TempDir()) / "whisper_config_test" / "whisper_tiny";
    std::filesystem::create_directories(path);
    std::ofstream(path / "tokenizer.json") << "{}";
    return new std::string(path.string());
  }();
  return *dir;
}

absl::StatusOr<ModelConfig> Parse(const std::string& text) {
  absl::StatusOr<YamlNode> root = YamlNode::LoadString(text, "repo/whisper_tiny/config.yaml");
  if (!root.ok()) return root.status();
  return ParseModelConfig(*root, ModelDir());
}

std::string ValidWith(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(WhisperConfigTest, ValidConfigLoadsAsAnEncoderDecoder) {
  absl::StatusOr<ModelConfig> config = Parse(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->kind, ModelKind::kSpeech);
  EXPECT_TRUE(config->is_encoder_decoder());
  EXPECT_EQ(config->buckets.lengths, (std::vector<int64_t>{480000}));
  ASSERT_TRUE(config->speech.has_value());
  const SpeechOptions& speech = *config->speech;
  EXPECT_EQ(speech.recognizer, RecognizerKind::kWhisper);
  EXPECT_EQ(speech.output, "encoder_hidden");
  EXPECT_EQ(speech.max_audio_seconds, 90);
  EXPECT_EQ(speech.whisper.start_token_id, 900);
  EXPECT_EQ(speech.whisper.transcribe_token_id, 950);
  EXPECT_EQ(speech.whisper.no_timestamps_token_id, 960);
  EXPECT_EQ(speech.whisper.languages, (std::vector<std::string>{"en", "de", "no"}));  // "no" stays a string
  EXPECT_EQ(speech.whisper.language_token_ids, (std::vector<int>{901, 902, 903}));
  EXPECT_EQ(speech.whisper.suppress_tokens, (std::vector<int>{1, 2}));
  EXPECT_EQ(speech.whisper.begin_suppress_tokens, (std::vector<int>{220, 899}));
  ASSERT_TRUE(config->generation.has_value());
  ASSERT_TRUE(config->generation->cross_attention.has_value());
  EXPECT_EQ(config->generation->cross_attention->encoder_positions, 1500);
  EXPECT_EQ(config->generation->cross_attention->encoder_hidden, 64);
  EXPECT_EQ(config->generation->cross_attention->encoder_output_size(), 1500 * 64);
}

TEST(WhisperConfigTest, CtcSpeechModelsAreNotEncoderDecoders) {
  absl::StatusOr<ModelConfig> config = Parse(kValid);
  ASSERT_TRUE(config.ok()) << config.status();
  config->generation.reset();
  EXPECT_FALSE(config->is_encoder_decoder());
}

struct BadCase {
  std::string name;
  std::string text;
  std::string message;
};

class BadWhisperConfigTest : public ::testing::TestWithParam<BadCase> {};

TEST_P(BadWhisperConfigTest, FailsNamingFileAndWhatIsWrong) {
  absl::StatusOr<ModelConfig> config = Parse(GetParam().text);
  ASSERT_FALSE(config.ok());
  EXPECT_THAT(config.status().ToString(), HasSubstr("repo/whisper_tiny/config.yaml"));
  EXPECT_THAT(config.status().ToString(), HasSubstr(GetParam().message));
}

INSTANTIATE_TEST_SUITE_P(
    Mistakes, BadWhisperConfigTest,
    ::testing::Values(
        BadCase{"UnknownRecognizer", ValidWith("recognizer: whisper", "recognizer: rnnt"), "unknown recognizer 'rnnt'"},
        BadCase{"CtcKeyOnWhisper", ValidWith("  output: encoder_hidden\n", "  output: encoder_hidden\n  blank: 0\n"),
                "blank"},
        BadCase{"NoWhisperSection",
                ValidWith("  whisper:\n    start_token_id: 900\n", "  whisper_ids:\n    start_token_id: 900\n"),
                "whisper_ids"},
        BadCase{"LanguageListsDiffer", ValidWith("[901, 902, 903]", "[901, 902]"), "has 2 ids for 3 languages"},
        BadCase{"TokenOutsideVocabulary", ValidWith("suppress_tokens: [1, 2]", "suppress_tokens: [1, 2000]"),
                "token id 2000 is outside the decoder's vocabulary"},
        BadCase{"NoCrossAttention",
                ValidWith("  cross_attention: {encoder_positions: 1500, encoder_hidden: 64}\n", ""),
                "needs a generation: section (the decoder) with cross_attention"},
        BadCase{"OutputShapeMismatch", ValidWith("shape: [1500, 64]", "shape: [1500, 32]"),
                "must be FP32 with shape [1500, 64]"},
        BadCase{"DecoderWithoutWhisperRecognizer",
                ValidWith("speech:\n  recognizer: whisper\n  output: encoder_hidden\n  max_audio_seconds: 90\n"
                          "  whisper:\n    start_token_id: 900\n    transcribe_token_id: 950\n"
                          "    no_timestamps_token_id: 960\n    languages: [\"en\", \"de\", \"no\"]\n"
                          "    language_token_ids: [901, 902, 903]\n    suppress_tokens: [1, 2]\n"
                          "    begin_suppress_tokens: [220, 899]\n",
                          ""),
                "needs speech: {recognizer: whisper}"}),
    [](const ::testing::TestParamInfo<BadCase>& info) { return info.param.name; });

}  // namespace
}  // namespace sluice
