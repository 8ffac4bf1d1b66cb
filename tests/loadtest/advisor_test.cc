// sluice-advisor: the bucket DP against brute force, optima known in closed form, the least-squares cost fit,
// the lengths and timings readers, the report, and the command line end to end.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <rapidjson/document.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "loadtest/advisor/advisor.h"
#include "loadtest/advisor/advisor_report.h"
#include "loadtest/advisor/bench_timings.h"
#include "loadtest/advisor/bucket_dp.h"
#include "loadtest/advisor/cost_model.h"
#include "loadtest/advisor/observed_lengths.h"
#include "tests/loadtest/advisor_cli.h"

namespace sluice::advisor {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The least objective over every subset of candidates that contains the last one and has ≤ K elements.
double BruteForce(const BucketProblem& p) {
  const size_t n = p.requests.size();
  double best = std::numeric_limits<double>::infinity();
  for (uint32_t mask = 0; mask < (1u << (n - 1)); ++mask) {
    std::vector<size_t> chosen;
    for (size_t i = 0; i + 1 < n; ++i) {
      if (mask & (1u << i)) chosen.push_back(i);
    }
    chosen.push_back(n - 1);
    if (chosen.size() > static_cast<size_t>(p.max_buckets)) continue;
    best = std::min(best, PartitionCost(p, chosen) + p.per_bucket_penalty * static_cast<double>(chosen.size()));
  }
  return best;
}

TEST(BucketDp, MatchesBruteForceExactlyOnRandomSmallProblems) {
  std::mt19937 rng(20240615);
  for (int trial = 0; trial < 600; ++trial) {
    const size_t n = 1 + rng() % 12;
    BucketProblem p;
    p.max_buckets = 1 + static_cast<int>(rng() % 6);
    p.per_bucket_penalty = trial % 3 == 0 ? std::uniform_real_distribution<double>(0, 50)(rng) : 0.0;
    double cost = 0;
    for (size_t i = 0; i < n; ++i) {
      p.requests.push_back(static_cast<double>(rng() % 20));
      // Increasing costs mostly; every fifth trial arbitrary (the DP must not rely on monotonicity).
      cost = trial % 5 == 0 ? std::uniform_real_distribution<double>(0, 10)(rng)
                            : cost + std::uniform_real_distribution<double>(0.01, 3)(rng);
      p.cost_per_request.push_back(cost);
    }
    absl::StatusOr<BucketSolution> s = SolveBuckets(p);
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->objective, BruteForce(p)) << "trial " << trial;
    EXPECT_EQ(s->total_cost, PartitionCost(p, s->chosen)) << "trial " << trial;
    EXPECT_EQ(s->chosen.back(), n - 1);
    EXPECT_LE(s->chosen.size(), static_cast<size_t>(p.max_buckets));
    EXPECT_TRUE(std::is_sorted(s->chosen.begin(), s->chosen.end()));
  }
}

TEST(BucketDp, RejectsMalformedProblems) {
  EXPECT_FALSE(SolveBuckets({}).ok());
  EXPECT_FALSE(SolveBuckets({.requests = {1, 2}, .cost_per_request = {1}, .max_buckets = 1}).ok());
  EXPECT_FALSE(SolveBuckets({.requests = {1}, .cost_per_request = {1}, .max_buckets = 0}).ok());
  EXPECT_FALSE(SolveBuckets({.requests = {-1}, .cost_per_request = {1}, .max_buckets = 1}).ok());
}

TEST(BucketDp, APenaltyPerBucketUsesFewerBuckets) {
  // Two groups; splitting saves 10 requests × 9 = 90 of compute; a penalty of 100 per bucket is not worth it.
  BucketProblem p{.requests = {10, 10}, .cost_per_request = {1, 10}, .max_buckets = 2};
  EXPECT_THAT(SolveBuckets(p)->chosen, ElementsAre(0, 1));
  p.per_bucket_penalty = 100;
  EXPECT_THAT(SolveBuckets(p)->chosen, ElementsAre(1));
}

std::vector<int64_t> Bimodal(int64_t low_max, int64_t high_max) {
  std::vector<int64_t> lengths;
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) lengths.push_back(low_max - 10 + static_cast<int64_t>(rng() % 11));   // 90..100
  for (int i = 0; i < 500; ++i) lengths.push_back(high_max - 50 + static_cast<int64_t>(rng() % 51));  // 950..1000
  lengths.push_back(low_max);
  lengths.push_back(high_max);
  return lengths;
}

TEST(Advisor, BimodalTrafficWithTwoBucketsCutsAtEachModesMaximum) {
  AdvisorInput in;
  in.lengths = Bimodal(100, 1000);
  in.cost = {0.001, 1e-6, 0};
  in.max_buckets = 2;
  absl::StatusOr<Advice> a = Advise(in);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->bucket_lengths, ElementsAre(100, 1000));
  EXPECT_THAT(a->ConfigLine(), "buckets: {lengths: [100, 1000]}");
}

TEST(Advisor, EnoughBucketsForEveryDistinctLengthMeansNoPadding) {
  AdvisorInput in;
  in.lengths = {5, 9, 9, 17, 30, 30, 30, 2};
  in.cost = kDefaultCostModel;
  in.max_buckets = 5;  // = distinct lengths
  absl::StatusOr<Advice> a = Advise(in);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(a->bucket_lengths, ElementsAre(2, 5, 9, 17, 30));
  EXPECT_DOUBLE_EQ(a->plans.front().efficiency(), 1.0);
  in.max_buckets = 50;
  EXPECT_THAT(Advise(in)->bucket_lengths, ElementsAre(2, 5, 9, 17, 30));
}

TEST(Advisor, TheLastBucketAlwaysCoversTheLongestRequest) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    AdvisorInput in;
    for (int i = 0; i < 200; ++i) in.lengths.push_back(1 + static_cast<int64_t>(rng() % 5000));
    in.cost = kDefaultCostModel;
    in.max_buckets = 1 + trial % 6;
    in.multiple_of = trial % 2 ? 160 : 1;
    in.max_candidates = trial % 3 ? 2000 : 20;
    const int64_t longest = *std::max_element(in.lengths.begin(), in.lengths.end());
    absl::StatusOr<Advice> a = Advise(in);
    ASSERT_TRUE(a.ok());
    EXPECT_GE(a->bucket_lengths.back(), longest);
    EXPECT_EQ(a->bucket_lengths.back() % in.multiple_of, 0);
    for (const PlanRow& p : a->plans) {
      if (p.name != "current") {
        EXPECT_EQ(p.refused, 0) << p.name;
      }
    }
    EXPECT_LE(a->plans.front().seconds_per_request, a->plans.back().seconds_per_request + 1e-15);
  }
}

TEST(Advisor, ComparesWithCurrentPowersOfTwoAndPadToMax) {
  AdvisorInput in;
  in.lengths = {100, 200, 300, 700, 900};
  in.cost = {0, 1, 0};  // compute = padded steps
  in.max_buckets = 2;
  in.current = {512, 1024};
  in.batch_sizes = {1, 4};
  absl::StatusOr<Advice> a = Advise(in);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->plans.size(), 4u);
  EXPECT_THAT(a->bucket_lengths, ElementsAre(300, 900));
  EXPECT_EQ(a->plans[0].padded_steps, 3 * 300 + 2 * 900);
  EXPECT_EQ(a->plans[0].graphs, 4);
  EXPECT_EQ(a->plans[1].name, "current");
  EXPECT_EQ(a->plans[1].padded_steps, 3 * 512 + 2 * 1024);
  EXPECT_THAT(a->plans[2].lengths, ElementsAre(512, 1024));
  EXPECT_THAT(a->plans[3].lengths, ElementsAre(900));
  EXPECT_DOUBLE_EQ(a->plans[3].seconds_per_request, 900);
  EXPECT_DOUBLE_EQ(a->plans[0].efficiency(), 2200.0 / 2700.0);
  EXPECT_DOUBLE_EQ(a->plans[0].throughput_rps(), 1 / 540.0);
}

TEST(Advisor, RequestsLongerThanTheCurrentLargestBucketAreCountedAsRefused) {
  AdvisorInput in;
  in.lengths = {10, 20, 300};
  in.cost = {0, 1, 0};
  in.current = {16, 32};
  absl::StatusOr<Advice> a = Advise(in);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->plans[1].refused, 1);
  EXPECT_EQ(a->plans[1].requests, 2);
  EXPECT_THAT(a->notes, testing::Contains(HasSubstr("refused")));
}

TEST(Advisor, MaxLengthClipsLongerRequestsLikeTheLoadGenerator) {
  AdvisorInput in;
  in.lengths = {10, 20, 300};
  in.cost = {0, 1, 0};
  in.current = {16, 32};
  in.clip_to = 32;
  absl::StatusOr<Advice> a = Advise(in);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bucket_lengths.back(), 32);
  EXPECT_EQ(a->plans[1].refused, 0);
  EXPECT_THAT(a->notes, testing::Contains(HasSubstr("--max-length")));
}

TEST(PowersOfTwo, LadderEndsAtTheFirstPowerCoveringTheMax) {
  EXPECT_THAT(PowersOfTwo(1000, 3, 1), ElementsAre(256, 512, 1024));
  EXPECT_THAT(PowersOfTwo(1024, 2, 1), ElementsAre(512, 1024));
  EXPECT_THAT(PowersOfTwo(560000, 5, 160), ElementsAre(40960, 81920, 163840, 327680, 655360));
  EXPECT_THAT(PowersOfTwo(3, 5, 1), ElementsAre(1, 2, 4));
}

TEST(Candidates, RoundUpAndMergeIntoQuantilesKeepingTheMax) {
  Candidates c = BuildCandidates({1, 150, 160, 161, 161}, 160, 100);
  EXPECT_THAT(c.lengths, ElementsAre(160, 320));
  EXPECT_THAT(c.requests, ElementsAre(3, 2));
  EXPECT_FALSE(c.merged);
  std::vector<int64_t> many;
  for (int64_t i = 1; i <= 1000; ++i) many.push_back(i);
  c = BuildCandidates(many, 1, 10);
  EXPECT_TRUE(c.merged);
  EXPECT_EQ(c.distinct_lengths, 1000);
  EXPECT_THAT(c.lengths, ElementsAre(100, 200, 300, 400, 500, 600, 700, 800, 900, 1000));
}

TEST(CostModel, LeastSquaresRecoversExactCoefficients) {
  const CostModel truth{0.004, 2.5e-7, 3e-13};
  std::vector<TimingPoint> points;
  for (int b : {1, 2, 4, 8}) {
    for (int64_t l : {16000, 32000, 64000, 128000, 256000}) points.push_back({b, l, truth.BatchSeconds(b, l)});
  }
  absl::StatusOr<CostModel> fit = FitCostModel(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->a, truth.a, 1e-9 * truth.a);
  EXPECT_NEAR(fit->b, truth.b, 1e-7 * truth.b);
  EXPECT_NEAR(fit->c, truth.c, 1e-7 * truth.c);
  EXPECT_TRUE(NondecreasingUpTo(*fit, 8, 256000));
}

TEST(CostModel, TooFewLengthsCannotPinDownThreeCoefficients) {
  EXPECT_FALSE(FitCostModel({{1, 100, 0.1}, {1, 200, 0.2}}).ok());
  absl::StatusOr<CostModel> fit = FitCostModel({{1, 100, 0.1}, {1, 100, 0.11}, {1, 200, 0.2}, {1, 200, 0.21}});
  ASSERT_FALSE(fit.ok());
  EXPECT_THAT(fit.status().message(), HasSubstr("distinct lengths"));
}

// Timings of long graphs only, linear with a negative intercept (2 µs per step - 2 ms: what short graphs that
// run faster per step than long ones look like over long lengths): the unconstrained fit of a + b·B·L + c·B·L²
// has a = -2 ms, which made the advisor's per-request costs negative at short lengths.
std::vector<TimingPoint> NegativeInterceptTimings() {
  std::vector<TimingPoint> points;
  for (int64_t l : {2000, 3000, 4000, 6000, 8000}) points.push_back({1, l, 2e-6 * static_cast<double>(l) - 0.002});
  return points;
}

TEST(CostModel, TheFitIsNonNegativeWhereUnconstrainedLeastSquaresGivesANegativeIntercept) {
  const std::vector<TimingPoint> points = NegativeInterceptTimings();
  // The unconstrained least-squares solution, from the normal equations (3x3, fine at this size), has a < 0.
  double ata[3][3] = {}, aty[3] = {};
  for (const TimingPoint& p : points) {
    const double l = static_cast<double>(p.length);
    const double row[3] = {1.0, l / 1e3, l * l / 1e6};  // scaled columns: 1, B·L, B·L² with B = 1
    for (int i = 0; i < 3; ++i) {
      aty[i] += row[i] * p.seconds;
      for (int j = 0; j < 3; ++j) ata[i][j] += row[i] * row[j];
    }
  }
  // Cramer's rule for the intercept.
  auto det3 = [](double m[3][3]) {
    return m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1]) - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0]) +
           m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0]);
  };
  double with_y[3][3];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) with_y[i][j] = j == 0 ? aty[i] : ata[i][j];
  }
  const double unconstrained_a = det3(with_y) / det3(ata);
  ASSERT_LT(unconstrained_a, -1e-3);

  absl::StatusOr<CostModel> fit = FitCostModel(points);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_GE(fit->a, 0);
  EXPECT_GE(fit->b, 0);
  EXPECT_GE(fit->c, 0);
  EXPECT_TRUE(NondecreasingUpTo(*fit, 1, 8000));
  // Optimality (KKT of non-negative least squares): with r the residual and g_j = -2·Σ r·x_j the gradient,
  // g_j == 0 for a term the fit keeps (> 0) and g_j >= 0 for a term it drops (0); columns scaled to unit size.
  double g[3] = {0, 0, 0};
  for (const TimingPoint& p : points) {
    const double l = static_cast<double>(p.length);
    const double r = p.seconds - fit->BatchSeconds(1, p.length);
    const double col[3] = {1.0, l / 8000, l * l / 64e6};
    for (int j = 0; j < 3; ++j) g[j] += -2 * r * col[j];
  }
  const double coef[3] = {fit->a, fit->b, fit->c};
  for (int j = 0; j < 3; ++j) {
    if (coef[j] > 0) {
      EXPECT_NEAR(g[j], 0, 1e-9) << "term " << j;
    } else {
      EXPECT_GE(g[j], -1e-9) << "term " << j;
    }
  }
  EXPECT_EQ(fit->a, 0);  // the intercept is the term the data push below zero
  // And the advice over these timings is made (it failed before: negative costs at short lengths).
  AdvisorInput in;
  in.lengths = {100, 500, 900, 3000, 7000};
  in.cost = *fit;
  in.cost_source = "test";
  in.max_buckets = 2;
  absl::StatusOr<Advice> advice = Advise(in);
  ASSERT_TRUE(advice.ok()) << advice.status();
  EXPECT_EQ(advice->bucket_lengths.back(), 7000);
}

TEST(CostModel, ANegativeGivenCostModelIsAnErrorNamingIt) {
  AdvisorInput in;
  in.lengths = {100, 200};
  in.cost = CostModel{-0.01, 1e-6, 0};
  in.cost_source = "--cost-model";
  absl::StatusOr<Advice> advice = Advise(in);
  ASSERT_FALSE(advice.ok());
  EXPECT_THAT(advice.status().message(), HasSubstr("cost model time = -0.01"));
  EXPECT_THAT(advice.status().message(), HasSubstr("(--cost-model)"));
  EXPECT_THAT(advice.status().message(), HasSubstr("at length 100"));
}

TEST(CostModel, ParsesThreeNumbersAndNamesTheBadOne) {
  EXPECT_DOUBLE_EQ(ParseCostModel("0.002, 1e-7, 0")->b, 1e-7);
  EXPECT_THAT(ParseCostModel("1,x,2").status().message(), HasSubstr("'x' (b)"));
  EXPECT_FALSE(ParseCostModel("1,2").ok());
}

TEST(BenchTimings, ReadsJsonObjectsAnywhereAndBenchBackendText) {
  const std::string json = R"({"models": [
      {"model": "asr_ctc", "buckets": [{"batch_size": 1, "length": 16000, "p50_ms": 10},
                                       {"batch_size": 2, "length": 32000, "p50_ms": 30}]},
      {"model": "text_embed", "buckets": [{"batch": 1, "length": 64, "seconds": 0.002}]}]})";
  EXPECT_FALSE(ParseBenchTimings(json, "", "b.json").ok());  // two models, none named
  absl::StatusOr<std::vector<TimingPoint>> asr = ParseBenchTimings(json, "asr_ctc", "b.json");
  ASSERT_TRUE(asr.ok());
  ASSERT_EQ(asr->size(), 2u);
  EXPECT_EQ((*asr)[1].batch_size, 2);
  EXPECT_DOUBLE_EQ((*asr)[1].seconds, 0.030);
  EXPECT_DOUBLE_EQ(ParseBenchTimings(json, "text_embed", "b.json")->front().seconds, 0.002);

  const std::string text =
      "model        instance  batch   length   load_s   warm_s\n"
      "asr_ctc      0             1    16000    0.100    0.050\n"
      "\nasr_ctc on cpu (1 thread): 5 timed runs per bucket, every row at full bucket length\n"
      " batch   length       p50_ms       min_ms       rows/s      audio_s/s\n"
      "     1    16000        12.00        11.00        83.33          83.3\n"
      "     8   256000       400.00       390.00        20.00         320.0\n";
  absl::StatusOr<std::vector<TimingPoint>> rows = ParseBenchTimings(text, "", "bench.txt");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].length, 256000);
  EXPECT_DOUBLE_EQ((*rows)[1].seconds, 0.4);
}

TEST(ObservedLengths, ReadsPlainCsvAndJsonLines) {
  EXPECT_THAT(*ParseLengths("# comment\n16000\n\n32000.0\n", "", "f"), ElementsAre(16000, 32000));
  EXPECT_THAT(*ParseLengths("id,length\na,100\nb,200\n", "", "f"), ElementsAre(100, 200));
  EXPECT_THAT(*ParseLengths("id,samples\na,100\n", "samples", "f"), ElementsAre(100));
  EXPECT_THAT(*ParseLengths("7,100\n8,200\n", "1", "f"), ElementsAre(100, 200));
  EXPECT_THAT(*ParseLengths("length\n5\n6\n", "", "f"), ElementsAre(5, 6));
  EXPECT_THAT(*ParseLengths("{\"length\": 5}\n{\"length\": 7, \"id\": 1}\n", "", "f"), ElementsAre(5, 7));
}

TEST(ObservedLengths, ErrorsNameTheFileAndLine) {
  EXPECT_THAT(ParseLengths("10\n20\nabc\n", "", "lengths.txt").status().message(),
              HasSubstr("lengths.txt:3: 'abc' is not a positive integer length"));
  EXPECT_THAT(ParseLengths("10\n-4\n", "", "f").status().message(), HasSubstr("f:2:"));
  EXPECT_THAT(ParseLengths("10\n12.5\n", "", "f").status().message(), HasSubstr("f:2:"));
  EXPECT_THAT(ParseLengths("{\"n\": 1}\n", "", "f").status().message(), HasSubstr("f:1: no key 'length'"));
  EXPECT_THAT(ParseLengths("id,length\na,x\n", "", "f").status().message(), HasSubstr("f:2: 'x'"));
  EXPECT_FALSE(ParseLengths("\n# nothing\n", "", "f").ok());
}

TEST(AdvisorReport, TableAndJsonCarryTheChosenLengthsAndEveryPlan) {
  AdvisorInput in;
  in.lengths = Bimodal(100, 1000);
  in.cost = {0.001, 1e-6, 0};
  in.cost_source = "test";
  in.max_buckets = 2;
  in.current = {128, 256, 512, 1024};
  absl::StatusOr<Advice> a = Advise(in);
  ASSERT_TRUE(a.ok());
  const std::string table = FormatAdvice(*a);
  EXPECT_THAT(table, HasSubstr("buckets: {lengths: [100, 1000]}"));
  EXPECT_THAT(table, HasSubstr("pad-to-max"));
  EXPECT_THAT(table, HasSubstr("powers of two"));
  EXPECT_THAT(a->plans[2].lengths, ElementsAre(512, 1024));
  rapidjson::Document doc;
  doc.Parse(AdviceToJson(*a).c_str());
  ASSERT_FALSE(doc.HasParseError());
  EXPECT_STREQ(doc["schema"].GetString(), "sluice-advisor/1");
  ASSERT_EQ(doc["bucket_lengths"].Size(), 2u);
  EXPECT_EQ(doc["bucket_lengths"][1].GetInt64(), 1000);
  ASSERT_EQ(doc["plans"].Size(), 4u);
  EXPECT_STREQ(doc["plans"][1]["name"].GetString(), "current");
  EXPECT_DOUBLE_EQ(doc["plans"][0]["vs_advised_compute"].GetDouble(), 1.0);
}

// --- the command line, end to end ---

class AdvisorCli : public AdvisorCliTest {};

TEST_F(AdvisorCli, WritesJsonWithTheBucketLengths) {
  std::string lengths;
  for (int64_t l : Bimodal(100, 1000)) lengths += std::to_string(l) + "\n";
  const std::string file = Write("lengths.txt", lengths);
  const std::string json = (dir_ / "advice.json").string();
  std::string output;
  ASSERT_EQ(Run("--lengths-file " + file + " --max-buckets 2 --cost-model 0.001,1e-6,0 --current 128,1024 --json " +
                    json,
                &output),
            0)
      << output;
  EXPECT_THAT(output, HasSubstr("buckets: {lengths: [100, 1000]}"));
  std::ifstream in(json);
  std::stringstream text;
  text << in.rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  ASSERT_FALSE(doc.HasParseError()) << text.str();
  ASSERT_TRUE(doc.HasMember("bucket_lengths"));
  EXPECT_EQ(doc["bucket_lengths"][0].GetInt64(), 100);
  EXPECT_EQ(doc["plans"].Size(), 4u);
}

TEST_F(AdvisorCli, ABadLengthsFileExitsTwoNamingTheLine) {
  const std::string file = Write("bad.txt", "100\n200\nhello\n");
  std::string output;
  EXPECT_EQ(Run("--lengths-file " + file + " --max-buckets 2", &output), 2);
  EXPECT_THAT(output, HasSubstr("--lengths-file"));
  EXPECT_THAT(output, HasSubstr("bad.txt:3:"));
}

TEST_F(AdvisorCli, BadArgumentsExitTwoNamingTheArgument) {
  const std::string file = Write("ok.txt", "100\n200\n");
  std::string output;
  EXPECT_EQ(Run("--lengths-file " + file + " --max-buckets 0", &output), 2);
  EXPECT_THAT(output, HasSubstr("--max-buckets"));
  EXPECT_EQ(Run("--lengths-file " + file + " --cost-model 1,2", &output), 2);
  EXPECT_THAT(output, HasSubstr("--cost-model"));
  EXPECT_EQ(Run("--max-buckets 2", &output), 2);
  EXPECT_THAT(output, HasSubstr("--lengths-file"));
  EXPECT_EQ(Run("--lengths-file " + file + " --current 10,x", &output), 2);
  EXPECT_THAT(output, HasSubstr("--current"));
  EXPECT_EQ(Run("--help", &output), 0);
  EXPECT_THAT(output, HasSubstr("--bench-json"));
}

TEST_F(AdvisorCli, FitsTheCostModelToBenchTimings) {
  const std::string bench = Write("bench.json", R"([{"batch_size": 1, "length": 100, "p50_ms": 1.1},
      {"batch_size": 1, "length": 200, "p50_ms": 1.4}, {"batch_size": 1, "length": 400, "p50_ms": 2.6},
      {"batch_size": 2, "length": 400, "p50_ms": 4.2}])");
  const std::string file = Write("lengths.txt", "50\n90\n390\n");
  std::string output;
  EXPECT_EQ(Run("--lengths-file " + file + " --max-buckets 2 --bench-json " + bench, &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("least squares over 4 timings"));
  EXPECT_THAT(output, HasSubstr("to apply: export"));
  EXPECT_THAT(output, HasSubstr("export_models.py --out NEW_REPO --models MODEL --lengths "));
}

TEST_F(AdvisorCli, BenchTimingsWithANegativeUnconstrainedInterceptGiveAdvice) {
  std::string rows;
  for (const TimingPoint& p : NegativeInterceptTimings()) {
    rows += (rows.empty() ? "" : ",") + std::string("{\"batch_size\": 1, \"length\": ") + std::to_string(p.length) +
            ", \"p50_ms\": " + std::to_string(p.seconds * 1e3) + "}";
  }
  const std::string bench = Write("bench.json", "[" + rows + "]");
  const std::string file = Write("lengths.txt", "100\n500\n900\n3000\n7000\n");
  std::string output;
  EXPECT_EQ(Run("--lengths-file " + file + " --max-buckets 2 --bench-json " + bench, &output), 0) << output;
  EXPECT_THAT(output, HasSubstr("non-negative least squares over 5 timings"));
  EXPECT_THAT(output, HasSubstr("time = 0 + "));
}

}  // namespace
}  // namespace sluice::advisor
