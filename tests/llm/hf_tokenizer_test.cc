// The Hugging Face tokenizer.json and Jinja chat-template support (server/llm/hf_tokenizers/): its C ABI's error
// contract (bad paths, bad JSON, invalid UTF-8, NULL), HfTokenizer behind the Tokenizer seam (special tokens never
// from user text, decoding skips them, streaming stays whole UTF-8) and JinjaChatTemplate's errors. Tokenizers are
// written by the test as JSON: a word-level one with added tokens, and a byte-level BPE with the 256 byte symbols.
// Parity with Python's `tokenizers` and transformers lives in hf_tokenizers_parity_test.sh.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/llm/hf_tokenizers/hf_tokenizer.h"
#include "server/llm/hf_tokenizers/include/sluice_hf_tokenizers.h"
#include "server/llm/hf_tokenizers/jinja_chat_template.h"
#include "server/llm/tokenizer.h"

namespace sluice {
namespace {

// A WordLevel tokenizer: whitespace pre-tokenizer, words hello/world/[UNK], special "<|end|>" (id 3) and a
// non-special added token "<tool>" (id 4).
constexpr char kWordLevelJson[] = R"({
  "version": "1.0", "truncation": null, "padding": null,
  "added_tokens": [
    {"id": 3, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
     "special": true},
    {"id": 4, "content": "<tool>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
     "special": false}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Whitespace"},
  "post_processor": null,
  "decoder": null,
  "model": {"type": "WordLevel", "vocab": {"hello": 0, "world": 1, "[UNK]": 2}, "unk_token": "[UNK]"}
})";

// GPT-2's byte-to-symbol table: printable bytes stand for themselves, the rest for U+0100 onwards.
std::vector<std::string> ByteSymbols() {
  std::vector<int> code(256, -1);
  for (int b = 0; b < 256; ++b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) code[b] = b;
  }
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    if (code[b] < 0) code[b] = next++;
  }
  std::vector<std::string> symbols;
  for (int point : code) {
    std::string utf8;
    if (point < 0x80) {
      utf8 += static_cast<char>(point);
    } else {
      utf8 += static_cast<char>(0xC0 | (point >> 6));
      utf8 += static_cast<char>(0x80 | (point & 0x3F));
    }
    symbols.push_back(utf8);
  }
  return symbols;
}

// Byte-level BPE without merges: every byte is one token (id = byte), so multi-byte characters span tokens.
std::string ByteLevelJson() {
  std::string vocab;
  const std::vector<std::string> symbols = ByteSymbols();
  for (int b = 0; b < 256; ++b) {
    std::string key = symbols[b] == "\"" ? "\\\"" : symbols[b] == "\\" ? "\\\\" : symbols[b];
    vocab += (b ? ", \"" : "\"") + key + "\": " + std::to_string(b);
  }
  return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
    "post_processor": null,
    "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
              "vocab": {)" +
         vocab + R"(}, "merges": []}})";
}

// BERT's framing (sentence-transformers' all-MiniLM-L6-v2 in miniature): BertNormalizer (lowercase, accents
// stripped), BertPreTokenizer, WordPiece with "##" continuations, a TemplateProcessing [CLS] $A [SEP] post-processor,
// and the truncation to 4 / padding to 8 such exports carry, which sluice must never apply.
constexpr char kBertJson[] = R"({
  "version": "1.0",
  "truncation": {"direction": "Right", "max_length": 4, "strategy": "LongestFirst", "stride": 0},
  "padding": {"strategy": {"Fixed": 8}, "direction": "Right", "pad_to_multiple_of": null, "pad_id": 0,
              "pad_type_id": 0, "pad_token": "[PAD]"},
  "added_tokens": [
    {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
     "special": true},
    {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
     "special": true},
    {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
     "special": true},
    {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false,
     "special": true}],
  "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null,
                 "lowercase": true},
  "pre_tokenizer": {"type": "BertPreTokenizer"},
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
    "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
             {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
    "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                       "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
  "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
  "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
            "max_input_chars_per_word": 100,
            "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "cafe": 4, "creme": 5, "is": 6, "good": 7,
                      "play": 8, "##ing": 9, "!": 10, "[": 11, "]": 12, "cl": 13, "##s": 14}}
})";

class HfTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("hf_tokenizer_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& text) {
    const std::filesystem::path path = dir_ / name;
    std::ofstream(path) << text;
    return path.string();
  }
  std::filesystem::path dir_;
};

TEST_F(HfTokenizerTest, CAbiLoadErrorsNameTheFileAndTheProblem) {
  char* error = nullptr;
  EXPECT_EQ(sluice_hf_tokenizer_load("/nonexistent/tokenizer.json", &error), nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("/nonexistent/tokenizer.json"), std::string::npos) << error;
  sluice_hf_string_free(error);

  const std::string bad = Write("bad.json", "{\"model\": 42");
  error = nullptr;
  EXPECT_EQ(sluice_hf_tokenizer_load(bad.c_str(), &error), nullptr);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("bad.json"), std::string::npos) << error;
  sluice_hf_string_free(error);

  EXPECT_EQ(sluice_hf_tokenizer_load(nullptr, nullptr), nullptr);  // NULL path, no error slot: no crash
}

TEST_F(HfTokenizerTest, CAbiRefusesInvalidUtf8AndNullHandles) {
  const std::string path = Write("tokenizer.json", kWordLevelJson);
  char* error = nullptr;
  SluiceHfTokenizer* tokenizer = sluice_hf_tokenizer_load(path.c_str(), &error);
  ASSERT_NE(tokenizer, nullptr) << error;
  uint32_t* ids = nullptr;
  size_t count = 0;
  const std::string invalid = "hello \xC3\x28 world";
  EXPECT_EQ(sluice_hf_tokenizer_encode(tokenizer, invalid.data(), invalid.size(), 0, 1, &ids, &count, &error),
            SLUICE_HF_INVALID_INPUT);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("not valid UTF-8 (byte 6)"), std::string::npos) << error;
  sluice_hf_string_free(error);
  EXPECT_EQ(ids, nullptr);
  EXPECT_EQ(count, 0u);

  error = nullptr;
  EXPECT_EQ(sluice_hf_tokenizer_encode(nullptr, "hello", 5, 0, 1, &ids, &count, &error), SLUICE_HF_INVALID_INPUT);
  sluice_hf_string_free(error);
  EXPECT_EQ(sluice_hf_tokenizer_token_to_id(tokenizer, "world", 5), 1);
  EXPECT_EQ(sluice_hf_tokenizer_token_to_id(tokenizer, "absent", 6), -1);
  EXPECT_EQ(sluice_hf_tokenizer_token_to_id(tokenizer, "\xFF", 1), -1);
  EXPECT_EQ(sluice_hf_tokenizer_vocab_size(tokenizer), 5u);
  EXPECT_EQ(sluice_hf_tokenizer_vocab_size(nullptr), 0u);
  sluice_hf_tokenizer_free(tokenizer);
  sluice_hf_tokenizer_free(nullptr);
}

TEST_F(HfTokenizerTest, SpecialTokensComeOnlyFromTemplateText) {
  auto tokenizer = HfTokenizer::Load(Write("tokenizer.json", kWordLevelJson));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // User text: "<|end|>" is text (its pieces are unknown words), the non-special added token still matches.
  auto as_text = (*tokenizer)->Tokenize("hello<|end|> world <tool>", SpecialTokens::kAsText);
  ASSERT_TRUE(as_text.ok()) << as_text.status();
  EXPECT_EQ(*as_text, (std::vector<int32_t>{0, 2, 2, 2, 1, 4}));  // "<|" "end" "|>": unknown words
  auto recognized = (*tokenizer)->Tokenize("hello<|end|> world <tool>", SpecialTokens::kRecognized);
  ASSERT_TRUE(recognized.ok()) << recognized.status();
  EXPECT_EQ(*recognized, (std::vector<int32_t>{0, 3, 1, 4}));
  EXPECT_EQ((*tokenizer)->FindSpecialToken("say <|end|> now"), "<|end|>");
  EXPECT_EQ((*tokenizer)->FindSpecialToken("say <tool> now"), std::nullopt);  // not special
  EXPECT_EQ((*tokenizer)->TokenId("<|end|>"), 3);
  // Decoding skips special tokens and ids outside the vocabulary.
  EXPECT_EQ((*tokenizer)->Decode({0, 3, 1, 99, -1}), "hello world");
  auto invalid = (*tokenizer)->Tokenize("\xFF", SpecialTokens::kAsText);
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  // WordLevel with an unknown token: a whole unknown word is one token, so no byte bound per token exists.
  EXPECT_EQ((*tokenizer)->max_piece_bytes(), -1);
}

TEST_F(HfTokenizerTest, BertWordPieceAddsItsTemplateAndNeverTruncatesOrPads) {
  auto tokenizer = HfTokenizer::Load(Write("tokenizer.json", kBertJson));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // Lowercased, accents stripped, "playing" split into play ##ing, punctuation its own word; [CLS] ... [SEP] around
  // it; six text tokens although the file says truncate to 4 and pad to 8.
  auto framed = (*tokenizer)->TokenizeWithPostProcessor("Crème café is PLAYING good!");
  ASSERT_TRUE(framed.ok()) << framed.status();
  EXPECT_EQ(*framed, (std::vector<int32_t>{2, 5, 4, 6, 8, 9, 7, 10, 3}));
  // Without the post-processor (the generation path's Tokenize) the same text has no framing.
  auto plain = (*tokenizer)->Tokenize("Crème café is PLAYING good!", SpecialTokens::kAsText);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(*plain, (std::vector<int32_t>{5, 4, 6, 8, 9, 7, 10}));
  // A special-token look-alike in user text is text: "[CLS]" -> [ cl ##s ], not id 2.
  auto lookalike = (*tokenizer)->TokenizeWithPostProcessor("[CLS]");
  ASSERT_TRUE(lookalike.ok()) << lookalike.status();
  EXPECT_EQ(*lookalike, (std::vector<int32_t>{2, 11, 13, 14, 12, 3}));
  EXPECT_EQ((*tokenizer)->TokenizeWithPostProcessor("\xff").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(HfTokenizerTest, TheSeamLoadsJsonFilesAndNamesTheProblem) {
  auto missing = Tokenizer::Load((dir_ / "missing" / "tokenizer.json").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("missing/tokenizer.json"), std::string::npos) << missing.status();
  auto loaded = Tokenizer::Load(Write("tokenizer.json", ByteLevelJson()));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->vocab_size(), 256);
}

TEST_F(HfTokenizerTest, StreamingByteLevelTokensGivesWholeCharacters) {
  auto tokenizer = Tokenizer::Load(Write("tokenizer.json", ByteLevelJson()));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string text = "naïve 日本語 🙂 end";
  const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
  ASSERT_EQ(ids.size(), text.size());  // one token per byte
  EXPECT_EQ((*tokenizer)->Decode(ids), text);
  IncrementalDetokenizer detokenizer(tokenizer->get());
  std::string streamed;
  for (int32_t id : ids) {
    const std::string delta = detokenizer.Add(id);
    EXPECT_EQ(delta.find("\xEF\xBF\xBD"), std::string::npos);  // never a replacement character
    streamed += delta;
  }
  streamed += detokenizer.Flush();
  EXPECT_EQ(streamed, text);
  // The bound: a byte-level token's symbols are at least as long as the bytes it stands for.
  EXPECT_EQ((*tokenizer)->max_piece_bytes(), 4);
}

// A SentencePiece-style BPE (unknown runs fused, but byte fallback on) under three normalizers.
std::string SentencePieceStyleJson(const std::string& normalizer) {
  return R"({"version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": )" +
         normalizer + R"(, "pre_tokenizer": null, "post_processor": null, "decoder": null,
    "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "continuing_subword_prefix": null,
              "end_of_word_suffix": null, "fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
              "vocab": {"<unk>": 0, "<0x41>": 1, "\u2581hello": 2}, "merges": []}})";
}

TEST_F(HfTokenizerTest, TheBytesPerTokenBoundFollowsTheNormalizer) {
  // The longest token text is "\u2581hello", 8 bytes; byte fallback keeps unknown input to one byte per token.
  const std::string replace =
      R"({"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
          {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]})";
  auto plain = HfTokenizer::Load(Write("plain.json", SentencePieceStyleJson(replace)));
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ((*plain)->max_piece_bytes(), 8);
  auto nfc = HfTokenizer::Load(Write("nfc.json", SentencePieceStyleJson(R"({"type": "NFC"})")));
  ASSERT_TRUE(nfc.ok()) << nfc.status();
  EXPECT_EQ((*nfc)->max_piece_bytes(), 24);  // NFC may fold 3 code points into one
  auto strip = HfTokenizer::Load(Write("strip.json", SentencePieceStyleJson(
                                                         R"({"type": "Strip", "strip_left": true, "strip_right": true})")));
  ASSERT_TRUE(strip.ok()) << strip.status();
  EXPECT_EQ((*strip)->max_piece_bytes(), -1);  // stripping deletes input: no bound
}

TEST_F(HfTokenizerTest, ChatTemplateRendersAndRefusesAsTransformersDoes) {
  const std::string source =
      "{{ bos_token }}{% for m in messages %}"
      "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
      "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
      "<|{{ m['role'] }}|>\n{{ m['content'].strip() }}{{ eos_token }}\n{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>\n{% endif %}";
  auto chat = JinjaChatTemplate::FromSource(source, "<s>", "</s>");
  ASSERT_TRUE(chat.ok()) << chat.status();
  auto text = (*chat)->Render({{"user", "  hi  "}, {"assistant", "hello"}, {"user", "bye"}}, true);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "<s><|user|>\nhi</s>\n<|assistant|>\nhello</s>\n<|user|>\nbye</s>\n<|assistant|>\n");
  auto refused = (*chat)->Render({{"assistant", "first"}}, true);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("Conversation roles must alternate"), std::string::npos)
      << refused.status();
  auto nul = (*chat)->Render({{"user", std::string("a\0b", 3)}}, true);
  EXPECT_EQ(nul.status().code(), absl::StatusCode::kInvalidArgument);
  auto invalid = (*chat)->Render({{"user", "\xC3\x28"}}, true);
  EXPECT_EQ(invalid.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(invalid.status().message().find("messages[0].content is not valid UTF-8"), std::string::npos)
      << invalid.status();
}

TEST_F(HfTokenizerTest, BrokenTemplatesAreClearErrors) {
  auto syntax = JinjaChatTemplate::FromSource("{% for m in messages %}{{ m['content'] }", std::nullopt, std::nullopt);
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("does not compile"), std::string::npos) << syntax.status();
  auto failing = JinjaChatTemplate::FromSource("{{ messages[0]['content'] | no_such_filter }}", std::nullopt,
                                               std::nullopt);
  if (failing.ok()) {  // minijinja may resolve filters at render time: then rendering is the clear error
    auto text = (*failing)->Render({{"user", "x"}}, false);
    EXPECT_EQ(text.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(text.status().message().find("no_such_filter"), std::string::npos) << text.status();
  } else {
    EXPECT_NE(failing.status().message().find("no_such_filter"), std::string::npos) << failing.status();
  }
  auto no_template = JinjaChatTemplate::Load(Write("tokenizer_config.json", R"({"bos_token": "<s>"})"));
  EXPECT_EQ(no_template.status().code(), absl::StatusCode::kNotFound);
  auto not_json = JinjaChatTemplate::Load(Write("broken_config.json", "{"));
  EXPECT_EQ(not_json.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_json.status().message().find("broken_config.json is not valid JSON"), std::string::npos);
  auto from_config = JinjaChatTemplate::Load(Write(
      "named_config.json", R"({"chat_template": [{"name": "tool_use", "template": "T"},
                                                 {"name": "default", "template": "{{ bos_token }}D"}],
                              "bos_token": {"content": "<s>", "special": true}, "eos_token": "</s>"})"));
  ASSERT_TRUE(from_config.ok()) << from_config.status();
  EXPECT_EQ((*from_config)->bos_token(), "<s>");
  EXPECT_EQ((*from_config)->eos_token(), "</s>");
  EXPECT_EQ(*(*from_config)->Render({{"user", "x"}}, false), "<s>D");
}

}  // namespace
}  // namespace sluice
