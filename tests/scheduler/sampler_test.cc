// Sampler: greedy ties, the softmax it draws from, top-k / top-p cut-offs, and seeds that reproduce draws.
#include "scheduler/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
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
std::map<int32_t, double> Frequencies(const std::vector<float>& logits, const SamplingParams& params, int draws) {
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
  EXPECT_EQ(sampler.Sample(std::vector<float>{1, 3, 3, 2}, SamplingParams{}, rng), 1);
  EXPECT_EQ(sampler.Sample(std::vector<float>{5, 5, 5}, SamplingParams{}, rng), 0);
  EXPECT_EQ(sampler.Sample(std::vector<float>{-1, -2, 4}, SamplingParams{}, rng), 2);
  EXPECT_EQ(rng, before) << "greedy must not consume draws";
}

TEST(SamplerTest, NanLogitsNeverWin) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(Sampler::Greedy(std::vector<float>{nan, 1, 0}), 1);
  EXPECT_EQ(Frequencies({nan, 0, nan}, {1.0f, 0, 1.0f, std::nullopt}, 100).size(), 1u);
  const float inf = std::numeric_limits<float>::infinity();
  Sampler sampler;
  std::mt19937_64 rng(3);
  EXPECT_EQ(sampler.Sample(std::vector<float>{-inf, -inf, nan}, {1.0f, 0, 1.0f, std::nullopt}, rng), 0);
}

TEST(SamplerTest, TopKOneAndTinyTopPEqualGreedy) {
  std::mt19937 logits_rng(11);
  Sampler sampler;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> logits = RandomLogits(logits_rng, 50);
    if (i % 4 == 0) logits[7] = logits[31] = 10.0f;  // a tie at the top: the lower id
    const int32_t greedy = Sampler::Greedy(logits);
    EXPECT_EQ(sampler.Sample(logits, {1.3f, 1, 1.0f, std::nullopt}, rng), greedy);
    EXPECT_EQ(sampler.Sample(logits, {0.7f, 0, 1e-6f, std::nullopt}, rng), greedy);
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
    for (const auto& row : rows) out.push_back(sampler.Sample(row, {0.8f, 10, 0.9f, seed}, rng));
    return out;
  };
  EXPECT_EQ(draw_all(42), draw_all(42));
  EXPECT_NE(draw_all(42), draw_all(43));
}

TEST(SamplerTest, DrawsFollowTheSoftmaxOfLogitsOverTemperature) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  auto f = Frequencies(logits, {1.0f, 0, 1.0f, std::nullopt}, 40000);
  EXPECT_NEAR(f[0], 0.5, 0.015);
  EXPECT_NEAR(f[1], 0.3, 0.015);
  EXPECT_NEAR(f[2], 0.2, 0.015);
  f = Frequencies(logits, {0.5f, 0, 1.0f, std::nullopt}, 40000);  // p^2, renormalised
  EXPECT_NEAR(f[0], 0.25 / 0.38, 0.015);
  EXPECT_NEAR(f[1], 0.09 / 0.38, 0.015);
  EXPECT_NEAR(f[2], 0.04 / 0.38, 0.015);
}

TEST(SamplerTest, TopKKeepsOnlyTheKHighest) {
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  auto f = Frequencies(logits, {1.0f, 2, 1.0f, std::nullopt}, 40000);
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_NEAR(f[1], 0.625, 0.015);
  EXPECT_NEAR(f[2], 0.375, 0.015);
}

TEST(SamplerTest, TopPKeepsTheSmallestSetThatReachesP) {
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  auto f = Frequencies(logits, {1.0f, 0, 0.5f, std::nullopt}, 1000);
  EXPECT_EQ(f.size(), 1u);
  EXPECT_EQ(f.count(1), 1u);
  f = Frequencies(logits, {1.0f, 0, 0.7f, std::nullopt}, 40000);
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_NEAR(f[1], 0.625, 0.015);
  EXPECT_NEAR(f[2], 0.375, 0.015);
  f = Frequencies(logits, {1.0f, 2, 0.9f, std::nullopt}, 40000);  // top-k first, then top-p within it
  EXPECT_EQ(f.count(0), 0u);
  EXPECT_EQ(f.size(), 2u);
}

}  // namespace
}  // namespace sluice
