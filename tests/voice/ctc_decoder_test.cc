// GreedyCtcDecoder on hand-made log-probs over asr_ctc's 29 classes (and a small SentencePiece table): repeats
// collapse, a blank separates repeated letters, separators become word boundaries without stray spaces, word
// times in ms with an offset, confidences, empty output, frame ranges; ValidateSymbolTable's errors.
#include "server/voice/ctc_decoder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

namespace sluice::voice {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

// asr_ctc: 0 blank, 1..26 'a'..'z', 27 ' ', 28 '\''.
SymbolTable AsrCtcTable() {
  SymbolTable table;
  table.symbols.push_back("<blank>");
  for (char c = 'a'; c <= 'z'; ++c) table.symbols.push_back(std::string(1, c));
  table.symbols.push_back(" ");
  table.symbols.push_back("'");
  return table;
}

// One frame per character of `path`: '_' is the blank, anything else the class of that character. The chosen
// class gets probability `p`; the rest share 1 - p.
std::vector<float> LogProbs(const SymbolTable& table, const std::string& path, float p = 0.9f) {
  const int64_t classes = table.symbols.size();
  std::vector<float> out;
  for (char c : path) {
    int64_t chosen = table.blank;
    for (int64_t k = 0; k < classes; ++k) {
      if (c != '_' && table.symbols[k] == std::string(1, c)) chosen = k;
    }
    for (int64_t k = 0; k < classes; ++k) {
      out.push_back(k == chosen ? std::log(p) : std::log((1 - p) / static_cast<float>(classes - 1)));
    }
  }
  return out;
}

Transcript DecodePath(const std::string& path, FrameTiming timing = {0.04, 0}) {
  const SymbolTable table = AsrCtcTable();
  const std::vector<float> log_probs = LogProbs(table, path);
  return GreedyCtcDecoder(table).Decode(log_probs, path.size(), table.symbols.size(), timing);
}

std::vector<std::string> Words(const Transcript& t) {
  std::vector<std::string> words;
  for (const WordTiming& w : t.words) words.push_back(w.word);
  return words;
}

TEST(GreedyCtcDecoderTest, RepeatsCollapse) {
  EXPECT_EQ(DecodePath("hhhee_llllo_").text, "helo");
  EXPECT_EQ(DecodePath("hhhee_ll_lo_").text, "hello");
}

TEST(GreedyCtcDecoderTest, BlankSeparatesRepeatedLetters) {
  EXPECT_EQ(DecodePath("aa").text, "a");
  EXPECT_EQ(DecodePath("a_a").text, "aa");
  EXPECT_EQ(DecodePath("a__a").text, "aa");
}

TEST(GreedyCtcDecoderTest, SpacesBecomeWordBoundaries) {
  const Transcript t = DecodePath("hi_  there_ don't");
  EXPECT_EQ(t.text, "hi there don't");
  EXPECT_THAT(Words(t), ElementsAre("hi", "there", "don't"));
}

TEST(GreedyCtcDecoderTest, NoLeadingTrailingOrDoubleSpaces) {
  const Transcript t = DecodePath("  _ hi _ _ there _  ");
  EXPECT_EQ(t.text, "hi there");
  EXPECT_THAT(Words(t), ElementsAre("hi", "there"));
}

TEST(GreedyCtcDecoderTest, OtherSeparatorSymbolsJoinWithOneSpace) {
  SymbolTable table{{"<pad>", "a", "b", "|"}, 0, "|"};
  std::vector<float> log_probs;
  for (int chosen : {1, 3, 3, 0, 3, 2, 3}) {  // a | | _ | b |
    for (int k = 0; k < 4; ++k) log_probs.push_back(k == chosen ? -0.1f : -5.0f);
  }
  const Transcript t = GreedyCtcDecoder(table).Decode(log_probs, 7, 4, {0.02, 0});
  EXPECT_EQ(t.text, "a b");
}

TEST(GreedyCtcDecoderTest, WordTimingsInMillisecondsWithOffset) {
  // Frames of 40 ms starting at 1.5 s: "hi" on frames 2..3, "you" on frames 6..9 (the repeated 'o' on frame 8
  // collapses; 'u' on frame 9 ends the word).
  const Transcript t = DecodePath("__hi_ yoou_", {0.04, 1.5});
  ASSERT_THAT(Words(t), ElementsAre("hi", "you"));
  EXPECT_EQ(t.words[0].start_ms, 1500 + 2 * 40);
  EXPECT_EQ(t.words[0].end_ms, 1500 + 4 * 40);
  EXPECT_EQ(t.words[1].start_ms, 1500 + 6 * 40);
  EXPECT_EQ(t.words[1].end_ms, 1500 + 10 * 40);
  EXPECT_EQ(t.frames, 11);
}

TEST(GreedyCtcDecoderTest, SentencePieceWordStarts) {
  const std::string start = "\xE2\x96\x81";  // "▁"
  SymbolTable table{{"<blank>", start + "hel", "lo", start + "wor", "ld", start}, 0, " "};
  std::vector<float> log_probs;
  // ▁hel lo _ ▁wor ld ▁ ▁ lo: a lone "▁" ends "world"; the next "lo" starts a word of its own.
  const std::vector<int> path = {1, 2, 0, 3, 4, 5, 0, 5, 2};
  for (int chosen : path) {
    for (int k = 0; k < 6; ++k) log_probs.push_back(k == chosen ? std::log(0.8f) : std::log(0.04f));
  }
  const Transcript t = GreedyCtcDecoder(table).Decode(log_probs, path.size(), 6, {0.04, 0});
  EXPECT_EQ(t.text, "hello world lo");
  ASSERT_THAT(Words(t), ElementsAre("hello", "world", "lo"));
  EXPECT_EQ(t.words[1].start_ms, 3 * 40);
  EXPECT_EQ(t.words[1].end_ms, 5 * 40);
  EXPECT_EQ(t.words[2].start_ms, 8 * 40);  // starts at its first symbol with text, not at the lone "▁"
}

TEST(GreedyCtcDecoderTest, EmptyOutput) {
  for (const std::string& path : {std::string(""), std::string("____"), std::string("_  _ ")}) {
    const Transcript t = DecodePath(path);
    EXPECT_EQ(t.text, "") << path;
    EXPECT_EQ(t.confidence, 0) << path;
    EXPECT_TRUE(t.words.empty()) << path;
    EXPECT_EQ(t.frames, static_cast<int64_t>(path.size())) << path;
  }
}

TEST(GreedyCtcDecoderTest, Confidence) {
  const SymbolTable table = AsrCtcTable();
  // "ab" at p = 0.9 and 0.5 (the 'b' frame), then " c" at 0.9.
  std::vector<float> log_probs = LogProbs(table, "ab");
  const std::vector<float> b_half = LogProbs(table, "b", 0.5f);
  std::copy(b_half.begin(), b_half.end(), log_probs.begin() + table.symbols.size());
  const std::vector<float> rest = LogProbs(table, " c");
  log_probs.insert(log_probs.end(), rest.begin(), rest.end());
  const Transcript t = GreedyCtcDecoder(table).Decode(log_probs, 4, table.symbols.size(), {0.04, 0});
  ASSERT_THAT(Words(t), ElementsAre("ab", "c"));
  EXPECT_THAT(t.words[0].confidence, FloatNear(0.7f, 1e-5));
  EXPECT_THAT(t.words[1].confidence, FloatNear(0.9f, 1e-5));
  EXPECT_THAT(t.confidence, FloatNear((0.9f + 0.5f + 0.9f + 0.9f) / 4, 1e-5));  // the space counts too
  EXPECT_GT(t.confidence, 0);
  EXPECT_LE(t.confidence, 1);

  // Log-probs that are not normalized never give a confidence above 1.
  std::vector<float> loud(table.symbols.size(), -1.0f);
  loud[1] = 2.0f;
  const Transcript clamped = GreedyCtcDecoder(table).Decode(loud, 1, table.symbols.size(), {0.04, 0});
  EXPECT_EQ(clamped.text, "a");
  EXPECT_EQ(clamped.confidence, 1.0f);
}

TEST(GreedyCtcDecoderTest, DecodeFrameRangeKeepsGlobalTimes) {
  const SymbolTable table = AsrCtcTable();
  const std::string path = "ab_ cd_ ef";
  const std::vector<float> log_probs = LogProbs(table, path);
  const GreedyCtcDecoder decoder(table);
  const int64_t classes = table.symbols.size();
  const Transcript middle = DecodeFrameRange(decoder, log_probs, path.size(), classes, {0.04, 1.0}, 3, 7);
  EXPECT_EQ(middle.text, "cd");
  EXPECT_EQ(middle.frames, 4);
  ASSERT_EQ(middle.words.size(), 1u);
  EXPECT_EQ(middle.words[0].start_ms, 1000 + 4 * 40);
  EXPECT_EQ(middle.words[0].end_ms, 1000 + 6 * 40);

  // The whole range equals Decode; ranges past the ends are clamped.
  EXPECT_EQ(DecodeFrameRange(decoder, log_probs, path.size(), classes, {0.04, 0}, 0, 10).text, "ab cd ef");
  EXPECT_EQ(DecodeFrameRange(decoder, log_probs, path.size(), classes, {0.04, 0}, -5, 99).text, "ab cd ef");
  EXPECT_EQ(DecodeFrameRange(decoder, log_probs, path.size(), classes, {0.04, 0}, 8, 4).frames, 0);
}

TEST(GreedyCtcDecoderTest, IsPure) {
  const SymbolTable table = AsrCtcTable();
  const std::vector<float> log_probs = LogProbs(table, "th_e cat");
  const GreedyCtcDecoder decoder(table);
  const Transcript a = decoder.Decode(log_probs, 8, table.symbols.size(), {0.04, 0});
  const Transcript b = decoder.Decode(log_probs, 8, table.symbols.size(), {0.04, 0});
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.confidence, b.confidence);
  EXPECT_EQ(a.words.size(), b.words.size());
}

TEST(ValidateSymbolTableTest, AcceptsAsrCtc) {
  EXPECT_TRUE(ValidateSymbolTable(AsrCtcTable(), 29).ok());
  SymbolTable empty_blank = AsrCtcTable();
  empty_blank.symbols[0] = "";
  EXPECT_TRUE(ValidateSymbolTable(empty_blank, 29).ok());
}

TEST(ValidateSymbolTableTest, NamesWhatIsWrong) {
  const SymbolTable table = AsrCtcTable();
  EXPECT_THAT(ValidateSymbolTable(table, 0).message(), HasSubstr("num_classes"));
  absl::Status size = ValidateSymbolTable(table, 30);
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(size.message(), HasSubstr("29 symbols but the model has 30"));

  SymbolTable bad_blank = table;
  bad_blank.blank = 29;
  EXPECT_THAT(ValidateSymbolTable(bad_blank, 29).message(), HasSubstr("blank index 29"));
  bad_blank.blank = -1;
  EXPECT_THAT(ValidateSymbolTable(bad_blank, 29).message(), HasSubstr("blank index -1"));

  SymbolTable empty_symbol = table;
  empty_symbol.symbols[5] = "";
  EXPECT_THAT(ValidateSymbolTable(empty_symbol, 29).message(), HasSubstr("symbol 5 is empty"));
}

}  // namespace
}  // namespace sluice::voice
