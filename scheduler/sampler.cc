#include "scheduler/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sluice {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The lazy ordering (OrderThrough) finds the first kScanPositions candidates one linear scan each (a peaked
// row's draw usually ends there), then blocks of at least kOrderBlock, each as large as what is ordered already
// (so a draw deep in a flat tail costs O(n log n), not O(n^2 / block)): one nth_element over the unordered rest
// and a sort of the block.
constexpr size_t kScanPositions = 4;
constexpr size_t kOrderBlock = 32;

// Candidates within this many (scaled) logits of the maximum are ordered before the rest is looked at: one cheap
// partition pass, after which a peaked row's draw orders only its few likely candidates. exp(-12) ~ 6e-6 of the
// top candidate's weight.
constexpr float kLikelyRange = 12.0f;

float Clean(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// Higher logit first; equal logits by ascending id, so every order below is deterministic. A function object,
// not a function: the sorting templates inline it (through a function pointer they call it, measurably slower).
struct Before {
  bool operator()(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) const {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  }
};

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

// Puts candidates_[0, i] in their final (Before) order, a scan or a block at a time, the likely range
// [0, likely_) first and then [likely_, keep) (every likely candidate comes before every other): the walk from
// the most probable candidate down rarely goes far, so a full sort of the vocabulary (which was most of the
// engine thread's host time per decode step) is paid only by draws that reach its tail.
void Sampler::OrderThrough(size_t i, size_t keep) {
  while (ordered_ <= i) {
    const size_t range_end = ordered_ < likely_ ? likely_ : keep;
    if (ordered_ < kScanPositions) {
      const auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(ordered_);
      std::iter_swap(first, std::min_element(first, candidates_.begin() + static_cast<std::ptrdiff_t>(range_end),
                                             Before{}));
      ++ordered_;
      continue;
    }
    const size_t end = std::min(range_end, ordered_ + std::max(kOrderBlock, ordered_));
    const auto first = candidates_.begin() + static_cast<std::ptrdiff_t>(ordered_);
    const auto last = candidates_.begin() + static_cast<std::ptrdiff_t>(end);
    if (end < range_end) {
      std::nth_element(first, last - 1, candidates_.begin() + static_cast<std::ptrdiff_t>(range_end), Before{});
    }
    std::sort(first, last, Before{});
    ordered_ = end;
  }
}

// Without a cut-off every id is a candidate, and a walk in any fixed order draws from the same softmax; id order
// needs no ordering at all: one pass for the maximum, one for the weights and their total, the walk. Ordering by
// probability, even lazily, cost up to 52 us a row of 2,000 ids on this project's CPU (1.0 ms at 49k ids, 2.6 ms
// at 128k; 16 rows a decode step, on the engine thread between steps); this costs 14 us (0.34 ms, 0.83 ms).
int32_t Sampler::DrawInIdOrder(absl::Span<const float> logits, float inverse_temperature, std::mt19937_64& rng) {
  float max_logit = kNegInf;
  for (float logit : logits) max_logit = std::max(max_logit, Clean(logit) * inverse_temperature);
  if (max_logit == kNegInf) return 0;  // nothing has any probability: the lowest id
  weights_.resize(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const float scaled = Clean(logits[i]) * inverse_temperature;
    // Equal to the maximum: weight 1 (also when the maximum is +infinity, where the difference would be NaN).
    // Single precision (~1e-7 relative, summed in double): float exp costs about half of double's, and the exps
    // are most of this function's time.
    weights_[i] = scaled == max_logit ? 1.0f : std::exp(scaled - max_logit);
    total += weights_[i];
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;  // [0, total)
  double cumulative = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    cumulative += weights_[i];
    if (u < cumulative) return static_cast<int32_t>(i);
  }
  size_t last = logits.size() - 1;  // rounding at the top end: the last id with any weight
  while (weights_[last] == 0.0f) --last;
  return static_cast<int32_t>(last);
}

int32_t Sampler::Sample(absl::Span<const float> logits, const SamplingParams& params, std::mt19937_64& rng) {
  if (params.temperature <= 0.0f) return Greedy(logits);
  const float inverse_temperature = 1.0f / params.temperature;
  const bool top_k_cuts = params.top_k > 0 && static_cast<size_t>(params.top_k) < logits.size();
  if (!top_k_cuts && params.top_p >= 1.0f) return DrawInIdOrder(logits, inverse_temperature, rng);
  candidates_.clear();
  candidates_.reserve(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(Clean(logits[i]) * inverse_temperature, static_cast<int32_t>(i));
  }
  size_t keep = candidates_.size();
  if (params.top_k > 0 && static_cast<size_t>(params.top_k) < keep) {
    keep = static_cast<size_t>(params.top_k);
    std::nth_element(candidates_.begin(), candidates_.begin() + keep - 1, candidates_.end(), Before{});
  }
  const auto kept_end = candidates_.begin() + static_cast<std::ptrdiff_t>(keep);
  const float max_logit =
      std::max_element(candidates_.begin(), kept_end, [](const auto& a, const auto& b) { return a.first < b.first; })
          ->first;
  ordered_ = 0;
  likely_ = keep;
  if (max_logit == kNegInf) {  // nothing has any probability: the lowest id
    OrderThrough(0, keep);
    return candidates_[0].second;
  }
  const float threshold = max_logit - kLikelyRange;
  likely_ = static_cast<size_t>(
      std::partition(candidates_.begin(), kept_end, [threshold](const auto& c) { return c.first >= threshold; }) -
      candidates_.begin());

  // Softmax weights (in double, shifted by the maximum) of the kept candidates; their sum in any order.
  // Weight 1 at the maximum (also when it is +infinity, where the difference would be NaN).
  auto weight = [&](size_t i) {
    const float scaled = candidates_[i].first;
    return scaled == max_logit ? 1.0 : std::exp(static_cast<double>(scaled) - max_logit);
  };
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += weight(i);
  if (params.top_p < 1.0f) {  // the smallest most-probable prefix whose mass reaches top_p
    const double target = static_cast<double>(params.top_p) * total;
    double cumulative = 0.0;
    size_t prefix = 0;
    while (prefix < keep) {
      OrderThrough(prefix, keep);
      cumulative += weight(prefix++);
      if (cumulative >= target) break;
    }
    keep = prefix;
    total = cumulative;
  }
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;  // [0, total)
  double cumulative = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    OrderThrough(i, keep);
    cumulative += weight(i);
    if (u < cumulative) return candidates_[i].second;
  }
  return candidates_[keep - 1].second;  // rounding at the top end
}

}  // namespace sluice
