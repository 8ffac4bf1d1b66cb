// Sampler: greedy ties, the softmax it draws from, top-k / top-p cut-offs, and seeds that reproduce draws.
#include "backend/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <algorithm>
#include <map>

namespace sluice {
namespace {

std::vector<float> RandomLogits(std::mt19937& rng, int vocab) {
  std::uniform_real_distribution<float> value(-3.0f, 3.0f);
  std::vector<float> logits(vocab);
  for (float& v : logits) v = value(rng);
  return logits;
}

// Frequencies of each id over `draws` samples.
std::map<int32_t, double> Frequencies(const std::vector<float>& logits, const TokenPick& params, int draws) {
  Sampler sampler;
  std::mt19937_64 rng(7);
  std::map<int32_t, double> counts;
  for (int i = 0; i < draws; ++i) counts[sampler.Sample(logits, params, rng)] += 1.0 / draws;
  return counts;
}

TEST(SamplerTest, GreedyTakesTheArgmaxAndTheLowestIdOnTies) {
  Sampler sampler;
  std::mt19937_64 rng(1);
  const std::mt19937_64 before = rng;
  EXPECT_EQ(sampler.Sample(std::vector<float>{1, 3, 3, 2}, TokenPick{}, rng), 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{5, 5, 5}, TokenPick{}, rng), 0);
  EXPECT_EQ(sampler.Sample(std::vector<float>{-1, -2, 4}, TokenPick{}, rng), 2);
  EXPECT_EQ(rng, before) << "greedy must not consume draws";
}

TEST(SamplerTest, NanLogitsNeverWin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Sampler::Greedy(std::vector<float>{nan, 1, 0}), 1);
  EXPECT_EQ(Frequencies({nan, 0, nan}, {1.0f, 0, 1.0f}, 100).size(), 1u);
  const float inf = std::numeric_limits<float>::infinity();
  Sampler sampler;
  std::mt19937_64 rng(3);
  EXPECT_EQ(sampler.Sample(std::vector<float>{-inf, -inf, nan}, {1.0f, 0, 1.0f}, rng), 0);
}

TEST(SamplerTest, InfiniteLogitsShareAllTheProbability) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<TokenPick> params = {{1.0f, 0, 1.0f}, {1.0f, 3, 0.9f}};
  for (const TokenPick& p : params) {
    auto f = Frequencies({inf, 0, inf, 5}, p, 4000);
    EXPECT_EQ(f.count(1) + f.count(3), 0u) << "top_k " << p.top_k;
    if (p.top_p >= 1.0f) {  // without a cut-off the +infinity ids split the draws
      EXPECT_NEAR(f[0], 0.5, 0.05);
      EXPECT_NEAR(f[2], 0.5, 0.05);
    }
  }
}

TEST(SamplerTest, TopKOneAndTinyTopPEqualGreedy) {
  std::mt19937 logits_rng(11);
  Sampler sampler;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> logits = RandomLogits(logits_rng, 50);
    if (i % 4 == 0) logits[7] = logits[31] = 10.0f;  // a tie at the top: the lower id
    const int32_t greedy = Sampler::Greedy(logits);
    EXPECT_EQ(sampler.Sample(logits, {1.3f, 1, 1.0f}, rng), greedy);
    EXPECT_EQ(sampler.Sample(logits, {0.7f, 0, 1e-6f}, rng), greedy);
  }
}

TEST(SamplerTest, SameSeedSameDrawsAndAnotherSeedOthers) {
  std::mt19937 logits_rng(13);
  std::vector<std::vector<float>> rows;
  for (int i = 0; i < 100; ++i) rows.push_back(RandomLogits(logits_rng, 32));
  auto draw_all = [&](uint64_t seed) {
    Sampler sampler;
    std::mt19937_64 rng(seed);
    std::vector<int32_t> out;
    for (const auto& row : rows) out.push_back(sampler.Sample(row, {0.8f, 10, 0.9f}, rng));
    return out;
  };
  EXPECT_EQ(draw_all(42), draw_all(42));
  EXPECT_NE(draw_all(42), draw_all(43));
}

TEST(SamplerTest, DrawsFollowTheSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  auto f = Frequencies(logits, {1.0f, 0, 1.0f}, 40000);
  EXPECT_NEAR(f[0], 0.5, 0.015);
  EXPECT_NEAR(f[1], 0.3, 0.015);
  EXPECT_NEAR(f[2], 0.2, 0.015);
  f = Frequencies(logits, {0.5f, 0, 1.0f}, 40000);  // p^2, renormalised
  EXPECT_NEAR(f[0], 0.25 / 0.38, 0.015);
  EXPECT_NEAR(f[1], 0.09 / 0.38, 0.015);
  EXPECT_NEAR(f[2], 0.04 / 0.38, 0.015);
}

TEST(SamplerTest, TopKKeepsOnlyTheKHighest) {
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  auto f = Frequencies(logits, {1.0f, 2, 1.0f}, 40000);
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_NEAR(f[1], 0.625, 0.015);
  EXPECT_NEAR(f[2], 0.375, 0.015);
}

TEST(SamplerTest, TopPKeepsTheSmallestSetThatReachesP) {
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  auto f = Frequencies(logits, {1.0f, 0, 0.5f}, 1000);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.count(1), 1u);
  f = Frequencies(logits, {1.0f, 0, 0.7f}, 40000);
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_NEAR(f[1], 0.625, 0.015);
  EXPECT_NEAR(f[2], 0.375, 0.015);
  f = Frequencies(logits, {1.0f, 2, 0.9f}, 40000);  // top-k first, then top-p within it
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_EQ(f.size(), 2u);
}

// The sampler's contract spelled out the slow way: every candidate sorted, the top-k and top-p sets cut from that
// order, softmax, one draw walking the kept ids in ascending order.
int32_t ReferenceSample(const std::vector<float>& logits, const TokenPick& params, std::mt19937_64& rng) {
  std::vector<std::pair<float, int32_t>> c;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float v = std::isnan(logits[i]) ? -std::numeric_limits<float>::infinity() : logits[i];
    c.emplace_back(v * (1.0f / params.temperature), static_cast<int32_t>(i));
  }
  std::sort(c.begin(), c.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  size_t keep = params.top_k > 0 ? std::min(c.size(), static_cast<size_t>(params.top_k)) : c.size();
  auto weight = [&](size_t i) { return c[i].first == c[0].first ? 1.0f : std::exp(c[i].first - c[0].first); };
  if (params.top_p < 1.0f) {
    double total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += weight(i);
    double cumulative = 0.0;
    size_t prefix = 0;
    while (prefix < keep && (cumulative += weight(prefix++)) < params.top_p * total) {
    }
    keep = prefix;
  }
  std::vector<double> by_id(logits.size(), 0.0);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += by_id[c[i].second] = weight(i);
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
  double cumulative = 0.0;
  for (size_t id = 0; id < by_id.size(); ++id) {
    if (u < (cumulative += by_id[id])) return static_cast<int32_t>(id);
  }
  return -1;  // only by rounding, which these rows do not reach
}

// The selections draw what a full sort would: peaked rows (a top-p set of one or two), flat rows with ties (sets
// cut between equal logits, by id), top-k and top-p cut-offs and none. Totals are summed in another order, so a
// draw could differ only when it falls within rounding of a boundary (never, at these counts).
TEST(SamplerTest, DrawsEqualAFullSortReference) {
  std::mt19937 logits_rng(17);
  Sampler sampler;
  std::mt19937_64 rng(9), reference_rng(9);
  const std::vector<TokenPick> params = {
      {1.0f, 0, 1.0f}, {0.7f, 0, 0.95f}, {1.5f, 50, 1.0f}, {1.0f, 300, 0.8f}, {4.0f, 0, 0.999f}};
  int deep = 0;
  for (int i = 0; i < 600; ++i) {
    std::vector<float> logits = RandomLogits(logits_rng, 2000);
    if (i % 3 == 0) {  // peaked: two high logits, a flat tail of equal ones
      std::fill(logits.begin(), logits.end(), 0.0f);
      logits[i % 2000] = 10.0f;
      logits[(i * 7) % 2000] = 9.0f;
    } else if (i % 3 == 1) {  // rounded values: many ties
      for (float& v : logits) v = std::round(v);
    }
    for (const TokenPick& p : params) {
      const int32_t got = sampler.Sample(logits, p, rng);
      const int32_t want = ReferenceSample(logits, p, reference_rng);
      ASSERT_EQ(got, want) << "row " << i << ", temperature " << p.temperature << ", top_k " << p.top_k
                           << ", top_p " << p.top_p;
      if (logits[got] < 5.0f && i % 3 == 0) ++deep;
    }
  }
  EXPECT_GT(deep, 10) << "some draws should land in the flat tail (sets cut between equal logits)";
}

}  // namespace
}  // namespace sluice
