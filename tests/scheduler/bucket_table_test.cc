#include "scheduler/bucket_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sluice {
namespace {

TEST(BucketTableTest, PicksTheSmallestBucketThatHoldsTheLength) {
  BucketTable table({{100, 200, 400}, {1, 2, 4, 8}});
  EXPECT_EQ(*table.BucketFor(1), 0u);
  EXPECT_EQ(*table.BucketFor(100), 0u);
  EXPECT_EQ(*table.BucketFor(101), 1u);
  EXPECT_EQ(*table.BucketFor(400), 2u);
  EXPECT_THAT(table.BucketFor(401).status().message(),
              ::testing::HasSubstr("input length 401 exceeds the largest compiled bucket (400)"));
  EXPECT_FALSE(table.BucketFor(0).ok());
  EXPECT_FALSE(table.BucketFor(-5).ok());
}

TEST(BucketTableTest, RoundsBatchesUpToACompiledSize) {
  BucketTable table({{100}, {1, 2, 4, 8}});
  EXPECT_EQ(table.BatchSizeFor(1), 1);
  EXPECT_EQ(table.BatchSizeFor(3), 4);
  EXPECT_EQ(table.BatchSizeFor(5), 8);
  EXPECT_EQ(table.BatchSizeFor(8), 8);
  EXPECT_EQ(table.BatchSizeIndex(3), 2u);
  EXPECT_EQ(table.BatchSizeIndex(8), 3u);
  EXPECT_EQ(table.BatchSizeIndex(9), 3u);  // past the largest: the largest
  EXPECT_EQ(table.LargestBatchSizeAtMost(7), 4);
  EXPECT_EQ(table.LargestBatchSizeAtMost(0), 0);
}

}  // namespace
}  // namespace sluice
