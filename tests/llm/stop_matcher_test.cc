#include "server/llm/stop_matcher.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace sluice {
namespace {

// Feeds pieces one by one and returns (everything released, stopped).
std::pair<std::string, bool> FeedPieces(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopMatcher matcher(std::move(stops));
  std::string out;
  for (const std::string& piece : pieces) out += matcher.Push(piece);
  const bool stopped = matcher.stopped();
  out += matcher.Finish();
  return {out, stopped};
}

TEST(StopMatcherTest, WithoutStopsEverythingPassesAtOnce) {
  StopMatcher matcher({});
  EXPECT_EQ(matcher.Push("hello"), "hello");
  EXPECT_EQ(matcher.Push(" world"), " world");
  EXPECT_EQ(matcher.Finish(), "");
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcherTest, CutsBeforeAStopStringSplitOverPieces) {
  auto [out, stopped] = FeedPieces({"\n\n"}, {"one", "\n", "\ntwo"});
  EXPECT_EQ(out, "one");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcherTest, HoldsOnlyWhatCouldStartAStopString) {
  StopMatcher matcher({"END"});
  EXPECT_EQ(matcher.Push("the E"), "the ");  // "E" might begin END
  EXPECT_EQ(matcher.Push("N"), "");           // "EN" still might
  EXPECT_EQ(matcher.Push("x"), "ENx");        // it did not
  EXPECT_FALSE(matcher.stopped());
}

TEST(StopMatcherTest, HeldTailIsReleasedAtTheEnd) {
  auto [out, stopped] = FeedPieces({"END"}, {"almost E", "N"});
  EXPECT_EQ(out, "almost EN");
  EXPECT_FALSE(stopped);
}

TEST(StopMatcherTest, TheEarliestOfSeveralStopsWins) {
  auto [out, stopped] = FeedPieces({"cd", "b"}, {"abcd"});
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcherTest, NothingAfterAStop) {
  StopMatcher matcher({"x"});
  EXPECT_EQ(matcher.Push("axb"), "a");
  EXPECT_EQ(matcher.Push("more"), "");
  EXPECT_EQ(matcher.Finish(), "");
}

TEST(StopMatcherTest, MultiByteStopStrings) {
  auto [out, stopped] = FeedPieces({"é!"}, {"caf", "é", "!", "zzz"});
  EXPECT_EQ(out, "caf");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcherTest, EmptyStopStringsAreIgnored) {
  auto [out, stopped] = FeedPieces({""}, {"abc"});
  EXPECT_EQ(out, "abc");
  EXPECT_FALSE(stopped);
}

}  // namespace
}  // namespace sluice
