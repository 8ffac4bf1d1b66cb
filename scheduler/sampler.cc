#include "scheduler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sluice {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float Clean(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// Higher logit first; equal logits by ascending id, so every order below is deterministic.
bool Before(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first != b.first ? a.first > b.first : a.second < b.second;
}

}  // namespace

int32_t Sampler::Greedy(absl::Span<const float> logits) {
  int32_t best = 0;
  float best_value = Clean(logits[0]);
  for (size_t i = 1; i < logits.size(); ++i) {
    const float v = Clean(logits[i]);
    if (v > best_value) {  // strict: a tie keeps the lower id
      best_value = v;
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

int32_t Sampler::Sample(absl::Span<const float> logits, const SamplingParams& params, std::mt19937_64& rng) {
  if (params.temperature <= 0.0f) return Greedy(logits);
  const float inverse_temperature = 1.0f / params.temperature;
  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(Clean(logits[i]) * inverse_temperature, static_cast<int32_t>(i));
  }
  size_t keep = candidates_.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::nth_element(candidates_.begin(), candidates_.begin() + keep - 1, candidates_.end(), Before);
  }
  std::sort(candidates_.begin(), candidates_.begin() + keep, Before);
  const float max_logit = candidates_[0].first;
  if (max_logit == kNegInf) return candidates_[0].second;  // nothing has any probability: lowest id

  // Softmax over the kept candidates (in double, shifted by the maximum), then the top_p prefix.
  weights_.assign(keep, 0.0);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    weights_[i] = std::exp(static_cast<double>(candidates_[i].first) - max_logit);
    total += weights_[i];
  }
  if (params.top_p < 1.0f) {
    const double target = static_cast<double>(params.top_p) * total;
    double cumulative = 0.0;
    size_t prefix = 0;
    while (prefix < keep) {
      cumulative += weights_[prefix++];
      if (cumulative >= target) break;
    }
    keep = prefix;
    total = cumulative;
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;  // [0, total)
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cumulative += weights_[i];
    if (u < cumulative) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;  // rounding at the top end
}

}  // namespace sluice
