// The tokenizer and incremental detokenizer on the example model's SentencePiece model (trained at build time by
// backend/compile/llm_tokenizer.py, byte fallback on).
#include "server/llm/tokenizer.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

std::string TokenizerPath() { return std::string(SLUICE_MODELS_DIR) + "/llama_tiny/tokenizer.model"; }

// Detokenizes `ids` one at a time, as the engine produces them.
std::string Stream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detokenizer(&tokenizer);
  std::string text;
  for (int32_t id : ids) text += detokenizer.Add(id);
  return text + detokenizer.Flush();
}

TEST(TokenizerTest, MissingFileIsAClearError) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load("/nonexistent/tokenizer.model");
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(tokenizer.status().message().find("/nonexistent/tokenizer.model"), std::string::npos);
}

TEST(TokenizerTest, EncodeDecodeRoundTrips) {
  auto tokenizer = Tokenizer::Load(TokenizerPath());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::string text = "This program is free software; you can redistribute it.";
  const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
  ASSERT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), text.size());  // real pieces, not one byte per token
  EXPECT_EQ((*tokenizer)->Decode(ids), text);
}

TEST(TokenizerTest, StreamingDecodeEqualsWholeDecodeForAsciiAndMultiByteText) {
  auto tokenizer = Tokenizer::Load(TokenizerPath());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  // Characters the training text lacks go through byte-fallback pieces, one token per UTF-8 byte.
  for (const std::string text : {std::string("Copyright (C) the authors, all rights reserved."),
                                 std::string("naïve café — 日本語 ✓ emoji 🙂 end")}) {
    const std::vector<int32_t> ids = (*tokenizer)->Encode(text);
    EXPECT_EQ((*tokenizer)->Decode(ids), text);
    EXPECT_EQ(Stream(**tokenizer, ids), text) << text;
  }
}

TEST(TokenizerTest, DeltasAreAlwaysWholeCharacters) {
  auto tokenizer = Tokenizer::Load(TokenizerPath());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<int32_t> ids = (*tokenizer)->Encode("日本語🙂");
  IncrementalDetokenizer detokenizer(tokenizer->get());
  for (int32_t id : ids) {
    const std::string delta = detokenizer.Add(id);
    if (delta.empty()) continue;
    // A whole-character delta never ends inside a sequence: its last lead byte's length fits in what follows.
    size_t i = 0;
    while (i < delta.size()) {
      const unsigned char c = static_cast<unsigned char>(delta[i]);
      const size_t n = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      ASSERT_LE(i + n, delta.size()) << "delta ends inside a character";
      i += n;
    }
  }
}

TEST(TokenizerTest, OutOfRangeIdsDecodeToNothing) {
  auto tokenizer = Tokenizer::Load(TokenizerPath());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const std::vector<int32_t> ids = (*tokenizer)->Encode("hello");
  std::vector<int32_t> with_junk = ids;
  with_junk.push_back(-1);
  with_junk.push_back((*tokenizer)->vocab_size() + 5);
  EXPECT_EQ((*tokenizer)->Decode(with_junk), (*tokenizer)->Decode(ids));
}

}  // namespace
}  // namespace sluice
