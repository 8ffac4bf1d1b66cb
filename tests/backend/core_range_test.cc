#include "backend/base/core_range.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(CoreRangeTest, ParsesSingleCoreAndRange) {
  EXPECT_EQ(*ParseCoreRange("3"), (CoreRange{3, 3}));
  EXPECT_EQ(*ParseCoreRange("0-7"), (CoreRange{0, 7}));
  EXPECT_EQ(ParseCoreRange("0-7")->size(), 8);
  EXPECT_EQ(ParseCoreRange("2-5")->ToString(), "2-5");
  EXPECT_EQ(ParseCoreRange("4")->ToString(), "4");
}

TEST(CoreRangeTest, RejectsMalformedText) {
  for (const char* bad : {"", "-", "a", "1-", "-1", "3-1", "0-4096", "1.5", "0,1", " 1", "1-2-3"}) {
    absl::StatusOr<CoreRange> range = ParseCoreRange(bad);
    EXPECT_FALSE(range.ok()) << "'" << bad << "'";
    EXPECT_THAT(range.status().message(), ::testing::HasSubstr("malformed core range")) << bad;
  }
}

TEST(CoreRangeTest, ReplicasSplitTheGroupEvenlyInOrder) {
  EXPECT_EQ(ReplicaCores({0, 1}, 2, 0), (CoreRange{0, 0}));
  EXPECT_EQ(ReplicaCores({0, 1}, 2, 1), (CoreRange{1, 1}));
  EXPECT_EQ(ReplicaCores({4, 9}, 3, 2), (CoreRange{8, 9}));
  EXPECT_EQ(ReplicaCores({2, 3}, 1, 0), (CoreRange{2, 3}));
}

}  // namespace
}  // namespace sluice
