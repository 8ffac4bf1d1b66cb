// PickTokens (backend/torch_token_pick.h), the TorchScript backend's picks on its device, against the host's
// Sampler with the same uniforms: greedy rows exactly; sampled rows equal, except where float rounding decides (the
// sums run in another order and torch's exp is not libm's): then the host itself picks the device's id with the
// uniform moved by at most 1e-6, and such rows are rare. Edge rows (ties, NaN, infinities, a cut-off of one or of
// everything) exactly.
#include "backend/torch_token_pick.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <random>
#include <vector>

#include "backend/sampler.h"

namespace sluice {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

torch::Tensor Rows(const std::vector<std::vector<float>>& rows) {
  torch::Tensor t = torch::empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(rows[0].size())});  // equal widths
  for (size_t r = 0; r < rows.size(); ++r) {
    for (size_t i = 0; i < rows[r].size(); ++i) t[r][i] = rows[r][i];
  }
  return t;
}

int32_t HostPick(Sampler& sampler, const std::vector<float>& row, TokenPick p, double uniform) {
  p.uniform = uniform;
  return sampler.Sample(row, p);
}

TEST(TorchTokenPickTest, RandomRowsPickWhatTheHostSamplerPicksUpToRounding) {
  std::mt19937_64 rng(2026);
  Sampler sampler;
  const std::vector<TokenPick> settings = {{0.0f, 0, 1.0f}, {1.0f, 0, 1.0f}, {0.7f, 40, 1.0f}, {1.3f, 0, 0.9f},
                                           {0.8f, 50, 0.95f}, {1.0f, 1, 1.0f}, {2.0f, 0, 0.3f}};
  int rows_checked = 0, rounding = 0;
  for (int vocab : {7, 300, 5000}) {
    for (int batch = 0; batch < 12; ++batch) {
      std::vector<std::vector<float>> rows;
      std::vector<TokenPick> picks;
      for (int r = 0; r < 16; ++r) {
        std::vector<float> row(vocab);
        std::normal_distribution<float> spread(0.0f, r % 3 == 0 ? 8.0f : 2.0f);  // peaked and spread rows
        for (float& v : row) v = spread(rng);
        if (r % 5 == 0) {
          for (int i = 0; i < vocab; i += 3) row[i] = std::round(row[i]);  // many equal logits
        }
        TokenPick p = settings[(batch * 16 + r) % settings.size()];
        p.uniform = Sampler::Uniform(rng);
        rows.push_back(std::move(row));
        picks.push_back(p);
      }
      const std::vector<int32_t> device = PickTokens(Rows(rows), picks);
      ASSERT_EQ(device.size(), rows.size());
      for (size_t r = 0; r < rows.size(); ++r, ++rows_checked) {
        const TokenPick& p = picks[r];
        const int32_t host = HostPick(sampler, rows[r], p, p.uniform);
        if (device[r] == host) continue;
        ASSERT_GT(p.temperature, 0.0f) << "greedy rows must match exactly (vocab " << vocab << ", row " << r << ")";
        const bool explained = HostPick(sampler, rows[r], p, std::max(0.0, p.uniform - 1e-6)) == device[r] ||
                               HostPick(sampler, rows[r], p, std::min(1.0 - 1e-16, p.uniform + 1e-6)) == device[r];
        EXPECT_TRUE(explained) << "vocab " << vocab << " row " << r << ": device " << device[r] << ", host " << host
                               << " (temperature " << p.temperature << ", top_k " << p.top_k << ", top_p " << p.top_p
                               << ", uniform " << p.uniform << ")";
        ++rounding;
      }
    }
  }
  std::cout << rounding << " of " << rows_checked << " rows differed by rounding\n";
  EXPECT_LE(rounding * 200, rows_checked) << rounding << " of " << rows_checked << " rows differed by rounding";
}

TEST(TorchTokenPickTest, EdgeRowsPickExactlyAsTheHost) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<std::vector<float>> rows = {
      {1, 3, 3, 2},           // tie at the maximum: the lower id when greedy
      {nan, 1, nan, 0.5f},    // NaN counts as -infinity
      {-kInf, -kInf, nan, -kInf},  // nothing has any probability: 0
      {0, kInf, 1, kInf},     // +infinity logits share the draw
      {5, 5, 5, 5},           // all equal
  };
  Sampler sampler;
  for (const TokenPick base : {TokenPick{0.0f, 0, 1.0f}, TokenPick{1.0f, 0, 1.0f}, TokenPick{0.5f, 2, 1.0f},
                               TokenPick{1.0f, 0, 0.5f}, TokenPick{1.0f, 1, 1.0f}, TokenPick{1.0f, 0, 1e-6f}}) {
    for (double uniform : {0.0, 0.3, 0.74, 0.9999999}) {
      std::vector<TokenPick> picks(rows.size(), base);
      for (TokenPick& p : picks) p.uniform = uniform;
      const std::vector<int32_t> device = PickTokens(Rows(rows), picks);
      for (size_t r = 0; r < rows.size(); ++r) {
        EXPECT_EQ(device[r], HostPick(sampler, rows[r], base, uniform))
            << "row " << r << ", temperature " << base.temperature << ", top_k " << base.top_k << ", top_p "
            << base.top_p << ", uniform " << uniform;
      }
    }
  }
}

}  // namespace
}  // namespace sluice
