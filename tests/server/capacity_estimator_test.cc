// CapacityEstimator on a FakeClock: known arrival rates and per-shape costs give the exact utilization and
// saturation throughput; the window forgets; a new mix replaces the old; measured batches replace (and calibrate)
// the warm-up costs. And sluice_request_length's boundaries.
#include "server/metrics/capacity_estimator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "backend/sim_backend.h"
#include "server/metrics/server_metrics.h"

namespace sluice {
namespace {

constexpr double kTolerance = 1e-9;

// Buckets 100/200 x batch sizes 1/4, two instances. Warm-up: a batch of 4 costs twice a batch of 1, so the
// efficient size is 4 in both buckets: t_100 = 0.020 / 4 = 0.005 s per row, t_200 = 0.040 / 4 = 0.010 s per row.
CapacityEstimatorOptions TwoBucketOptions(const FakeClock& clock) {
  CapacityEstimatorOptions options;
  options.buckets = {{100, 200}, {1, 4}};
  options.instances = 2;
  options.warmup_seconds = {{0.010, 0.020}, {0.020, 0.040}};
  options.clock = &clock;
  options.window = absl::Seconds(60);
  return options;
}

// Every second for `seconds` seconds: `short_per_second` requests of length 80 and `long_per_second` of 150.
void Arrive(CapacityEstimator& estimator, FakeClock& clock, int seconds, int short_per_second, int long_per_second) {
  for (int s = 0; s < seconds; ++s) {
    for (int i = 0; i < short_per_second; ++i) estimator.RecordArrival(1, 80);
    for (int i = 0; i < long_per_second; ++i) estimator.RecordArrival(1, 150);
    clock.Advance(absl::Seconds(1));
  }
}

TEST(CapacityEstimatorTest, KnownRatesAndCostsGiveExactUtilizationAndMaxRequestsPerSecond) {
  FakeClock clock;
  CapacityEstimator estimator(TwoBucketOptions(clock));
  Arrive(estimator, clock, 30, 3, 1);  // 30 s, before the window is full: T = 30 s
  const CapacityEstimate e = estimator.Estimate();
  EXPECT_NEAR(e.arrivals_per_second, 4.0, kTolerance);
  // needed = 3/s x 0.005 + 1/s x 0.010 = 0.025 instance-seconds per second, over 2 instances.
  EXPECT_NEAR(e.needed_instance_seconds, 0.025, kTolerance);
  EXPECT_NEAR(e.utilization, 0.0125, kTolerance);
  // max = 2 / (0.75 x 0.005 + 0.25 x 0.010) = 320 requests/s; utilization = arrivals / max.
  EXPECT_NEAR(e.max_requests_per_second, 320.0, kTolerance);
  EXPECT_NEAR(e.utilization, e.arrivals_per_second / e.max_requests_per_second, kTolerance);
}

TEST(CapacityEstimatorTest, RowsOfOneRequestAllCountButItIsOneRequest) {
  FakeClock clock;
  CapacityEstimator estimator(TwoBucketOptions(clock));
  estimator.RecordArrival(4, 80);  // one request, 4 rows of bucket 100
  clock.Advance(absl::Seconds(2));
  const CapacityEstimate e = estimator.Estimate();
  EXPECT_NEAR(e.arrivals_per_second, 0.5, kTolerance);
  EXPECT_NEAR(e.utilization, 4 * 0.005 / 2 / 2, kTolerance);
  EXPECT_NEAR(e.max_requests_per_second, 2 / (4 * 0.005), kTolerance);
}

TEST(CapacityEstimatorTest, ArrivalsLeaveTheWindowAfterSixtySeconds) {
  FakeClock clock;
  CapacityEstimator estimator(TwoBucketOptions(clock));
  Arrive(estimator, clock, 30, 3, 1);  // slots 0..29
  clock.Advance(absl::Seconds(45));    // now = 75 s: slots 16..75 count, from 16 s to 75 s (59 s)
  CapacityEstimate e = estimator.Estimate();
  EXPECT_NEAR(e.arrivals_per_second, 14 * 4 / 59.0, kTolerance);
  EXPECT_NEAR(e.utilization, 14 * 0.025 / 59.0 / 2, kTolerance);
  EXPECT_NEAR(e.max_requests_per_second, 320.0, kTolerance);

  clock.Advance(absl::Seconds(30));  // nothing in the window any more
  e = estimator.Estimate();
  EXPECT_EQ(e.arrivals_per_second, 0);
  EXPECT_EQ(e.utilization, 0);
  EXPECT_NEAR(e.max_requests_per_second, 320.0, kTolerance);  // the mix seen since start
}

TEST(CapacityEstimatorTest, ANewMixReplacesTheOldOneAsTheWindowSlides) {
  FakeClock clock;
  CapacityEstimator estimator(TwoBucketOptions(clock));
  Arrive(estimator, clock, 60, 10, 0);  // only bucket 100: 2 / 0.005
  EXPECT_NEAR(estimator.Estimate().max_requests_per_second, 400.0, kTolerance);
  EXPECT_NEAR(estimator.Estimate().utilization, 10 * 0.005 / 2, kTolerance);
  Arrive(estimator, clock, 60, 0, 10);  // then only bucket 200: 2 / 0.010
  EXPECT_NEAR(estimator.Estimate().max_requests_per_second, 200.0, kTolerance);
  EXPECT_NEAR(estimator.Estimate().utilization, 10 * 0.010 / 2, kTolerance);
}

TEST(CapacityEstimatorTest, NoArrivalsGiveZeroUtilizationAndTheLargestBucketsWarmupThroughput) {
  FakeClock clock;
  CapacityEstimator estimator(TwoBucketOptions(clock));
  clock.Advance(absl::Seconds(10));
  const CapacityEstimate e = estimator.Estimate();
  EXPECT_EQ(e.utilization, 0);
  EXPECT_EQ(e.arrivals_per_second, 0);
  EXPECT_NEAR(e.max_requests_per_second, 2 / 0.010, kTolerance);  // every request at 200, batches of 4
}

TEST(CapacityEstimatorTest, MeasuredBatchesReplaceWarmupAndCalibrateShapesThatHaveNotRun) {
  FakeClock clock;
  CapacityEstimator estimator(TwoBucketOptions(clock));
  estimator.RecordBatch(100, 1, absl::Milliseconds(20));  // twice its warm-up time
  estimator.RecordArrival(1, 150);
  clock.Advance(absl::Seconds(1));
  // (200, 4) has not run: its warm-up 0.040 x (0.020 / 0.010) = 0.080 s, 0.020 s per row.
  EXPECT_NEAR(estimator.Estimate().max_requests_per_second, 2 / 0.020, kTolerance);

  estimator.RecordBatch(200, 4, absl::Milliseconds(30));
  estimator.RecordBatch(200, 4, absl::Milliseconds(40));  // EWMA: 0.8 x 0.030 + 0.2 x 0.040 = 0.032
  EXPECT_NEAR(estimator.Estimate().max_requests_per_second, 2 / (0.032 / 4), kTolerance);
  estimator.RecordBatch(200, 3, absl::Milliseconds(1));   // not a compiled shape: ignored
  estimator.RecordBatch(150, 4, absl::Milliseconds(1));   // nor this
  EXPECT_NEAR(estimator.Estimate().max_requests_per_second, 2 / (0.032 / 4), kTolerance);
}

TEST(CapacityEstimatorTest, UsesTheBatchSizeTheSchedulerFormsWhenSmallBatchesAreFasterPerRow) {
  FakeClock clock;
  CapacityEstimatorOptions options = TwoBucketOptions(clock);
  options.instances = 1;
  options.warmup_seconds = {{0.010, 0.050}, {0.020, 0.100}};  // CPU-like: 4 rows cost more than 4 x 1 row
  CapacityEstimator estimator(std::move(options));
  estimator.RecordArrival(1, 50);
  clock.Advance(absl::Seconds(1));
  EXPECT_NEAR(estimator.Estimate().max_requests_per_second, 100.0, kTolerance);  // batches of 1, 0.010 s each
}

TEST(CapacityEstimatorTest, LengthsOutsideTheBucketsAreNotArrivals) {
  FakeClock clock;
  CapacityEstimator estimator(TwoBucketOptions(clock));
  estimator.RecordArrival(1, 0);
  estimator.RecordArrival(1, 201);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(estimator.Estimate().arrivals_per_second, 0);
}

TEST(CapacityEstimatorTest, WarmupSecondsFallBackToTheSimCostModel) {
  ModelConfig model;
  model.name = "sim";
  model.buckets = {{100, 200}, {1, 4}};
  InstanceGroup group;
  group.device = DeviceKind::kSim;
  model.instances = {group};
  model.sim = SimCostModel{10, 2, 1.0};  // 10 ms + 2 us x B x L; the sim reports no warm-up times
  std::unique_ptr<Backend> sim = *CreateSimBackend({&model, model.instances.front()});
  const auto seconds = CapacityEstimator::WarmupSeconds(model, {sim.get()});
  ASSERT_EQ(seconds.size(), 2u);
  EXPECT_NEAR(seconds[0][0], 0.010 + 2e-6 * 100, kTolerance);
  EXPECT_NEAR(seconds[1][1], 0.010 + 2e-6 * 4 * 200, kTolerance);
}

TEST(RequestLengthBoundariesTest, FivePercentApartFromOneToTheLargestBucketWithEveryBucket) {
  const std::vector<double> b = RequestLengthBoundaries({32, 64, 128, 256, 512});
  ASSERT_FALSE(b.empty());
  EXPECT_EQ(b.front(), 1);
  EXPECT_EQ(b.back(), 512);
  for (double length = 1; length <= 20; ++length) EXPECT_THAT(b, ::testing::Contains(length));
  for (double bucket : {32, 64, 128, 256, 512}) EXPECT_THAT(b, ::testing::Contains(bucket));
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_GT(b[i], b[i - 1]);
    EXPECT_EQ(b[i], std::round(b[i]));
    if (b[i - 1] >= 20) {
      EXPECT_LE(b[i] / b[i - 1], 1.05 + 1.0 / b[i - 1]) << b[i - 1] << " -> " << b[i];
    }
  }
  EXPECT_LE(b.size(), 200u);
}

TEST(RequestLengthBoundariesTest, AtMostTwoHundredPlusTheBucketsForLongSpeechBuckets) {
  const std::vector<int64_t> buckets = {16000, 32000, 64000, 128000, 256000};
  const std::vector<double> b = RequestLengthBoundaries(buckets);
  EXPECT_LE(b.size(), 200u + buckets.size());
  EXPECT_GE(b.size(), 150u);
  EXPECT_EQ(b.back(), 256000);
  for (int64_t bucket : buckets) EXPECT_THAT(b, ::testing::Contains(static_cast<double>(bucket)));
  const double ratio = std::pow(256000.0, 1.0 / 199);  // ~6.5 % apart
  for (size_t i = 1; i < b.size(); ++i) {
    if (b[i - 1] >= 20) {
      EXPECT_LE(b[i] / b[i - 1], ratio + 1.0 / b[i - 1]);
    }
  }
}

}  // namespace
}  // namespace sluice
