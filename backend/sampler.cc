#include "backend/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sluice {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float Clean(float logit) { return std::isnan(logit) ? kNegInf : logit; }

// A softmax weight, shifted by the maximum, in single precision (~1e-7 relative; every sum is in double): float
// exp costs about half of double's, and the exps are most of a draw's time. 1 at the maximum, also when it is
// +infinity (where the difference would be NaN).
float Weight(float scaled, float max_logit) { return scaled == max_logit ? 1.0f : std::exp(scaled - max_logit); }

// The draw: entries 0..count-1 walked in order (weight_of(i), id_of(i)), u = uniform x their total weight, and the
// id where the cumulative weight first exceeds u (rounding at the top end: the last entry with any weight).
template <typename WeightOf, typename IdOf>
int32_t Walk(size_t count, WeightOf weight_of, IdOf id_of, double uniform) {
  double total = 0.0;
  for (size_t i = 0; i < count; ++i) total += weight_of(i);
  const double u = uniform * total;
  double cumulative = 0.0;
  size_t last = 0;
  for (size_t i = 0; i < count; ++i) {
    const float w = weight_of(i);
    cumulative += w;
    if (u < cumulative) return id_of(i);
    if (w > 0.0f) last = i;
  }
  return id_of(last);
}

// Higher logit first; equal logits by ascending id: a strict total order, so every cut-off below is deterministic.
// A function object, not a function: the selection templates inline it.
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

// The draw never needs the candidates in probability order, only the cut-offs' sets: top-k is a selection
// (nth_element) and top-p a selection by weight (SelectNucleus), both O(vocabulary), and the walk goes in id order.
// Ordering by probability, even lazily, cost up to 52 us a row of 2,000 ids on this project's CPU without a
// cut-off (1.0 ms at 49k ids, 2.6 ms at 128k) and 100 us / 1.9 ms with top_p 0.95, 16 rows a decode step on the
// engine thread between steps (sluice-bench-sampler).
int32_t Sampler::Sample(absl::Span<const float> logits, const TokenPick& pick) {
  if (pick.temperature <= 0.0f) return Greedy(logits);
  const float inverse_temperature = 1.0f / pick.temperature;
  const size_t vocab = logits.size();
  const double uniform = pick.uniform;
  if (pick.top_k > 0 && static_cast<size_t>(pick.top_k) < vocab) {
    return SampleTopK(logits, inverse_temperature, static_cast<size_t>(pick.top_k), pick.top_p, uniform);
  }
  // The scaled maximum: scaling by a positive factor keeps the order (rounding is monotonic), so it is the
  // greedy id's logit scaled, and equals the scaled value of the ids that hold it.
  const float max_logit = Clean(logits[static_cast<size_t>(Greedy(logits))]) * inverse_temperature;
  if (max_logit == kNegInf) return 0;  // nothing has any probability: the lowest id
  weights_.resize(vocab);
  for (size_t i = 0; i < vocab; ++i) weights_[i] = Weight(Clean(logits[i]) * inverse_temperature, max_logit);
  if (pick.top_p < 1.0f) {
    return DrawAmongCandidates(CandidatesForTopP(logits, inverse_temperature, pick.top_p), uniform);
  }
  return DrawById(uniform);
}

// Only the top k are weighed: a selection (nth_element), their maximum, their weights, then top-p among them.
int32_t Sampler::SampleTopK(absl::Span<const float> logits, float inverse_temperature, size_t k, float top_p,
                            double uniform) {
  candidates_.clear();
  for (size_t i = 0; i < logits.size(); ++i) {
    candidates_.emplace_back(Clean(logits[i]) * inverse_temperature, static_cast<int32_t>(i));
  }
  const auto kept_end = candidates_.begin() + static_cast<std::ptrdiff_t>(k);
  std::nth_element(candidates_.begin(), kept_end - 1, candidates_.end(), Before{});
  const float max_logit = std::min_element(candidates_.begin(), kept_end, Before{})->first;
  if (max_logit == kNegInf) return 0;  // nothing has any probability: the lowest id
  weights_.resize(logits.size());  // only the kept ids' entries are read
  double kept_weight = 0.0;
  for (auto it = candidates_.begin(); it != kept_end; ++it) {
    kept_weight += weights_[it->second] = Weight(it->first, max_logit);
  }
  size_t keep = k;
  if (top_p < 1.0f) keep = SelectNucleus(keep, static_cast<double>(top_p) * kept_weight);
  return DrawAmongCandidates(keep, uniform);
}

// Top-p without top-k: the ids weighing at most (1 - top_p) x total / vocab weigh at most (1 - top_p) x total
// together, so the top-p set lies within the others, and only they are candidates for the selection (a peaked
// row: a few).
size_t Sampler::CandidatesForTopP(absl::Span<const float> logits, float inverse_temperature, float top_p) {
  double total = 0.0;
  for (float w : weights_) total += w;
  const double floor = (1.0 - static_cast<double>(top_p)) * total / static_cast<double>(weights_.size());
  candidates_.clear();
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (weights_[i] > floor) {
      candidates_.emplace_back(Clean(logits[i]) * inverse_temperature, static_cast<int32_t>(i));
    }
  }
  return SelectNucleus(candidates_.size(), static_cast<double>(top_p) * total);
}

// Walks candidates_[0, keep) in id order: sorted by id when they are few, else through weights_ with every other
// id weighed 0 (a pass over the vocabulary costs less than sorting many).
int32_t Sampler::DrawAmongCandidates(size_t keep, double uniform) {
  if (keep * 16 >= weights_.size()) {
    cut_.assign(weights_.size(), 0.0f);
    for (size_t i = 0; i < keep; ++i) cut_[candidates_[i].second] = weights_[candidates_[i].second];
    weights_.swap(cut_);
    return DrawById(uniform);
  }
  const auto end = candidates_.begin() + static_cast<std::ptrdiff_t>(keep);
  std::sort(candidates_.begin(), end, [](const auto& a, const auto& b) { return a.second < b.second; });
  return Walk(
      keep, [this](size_t i) { return weights_[candidates_[i].second]; },
      [this](size_t i) { return candidates_[i].second; }, uniform);
}

// Walks every id in order through weights_.
int32_t Sampler::DrawById(double uniform) {
  return Walk(
      weights_.size(), [this](size_t i) { return weights_[i]; }, [](size_t i) { return static_cast<int32_t>(i); },
      uniform);
}

// A quickselect by weight. Invariant: candidates_[0, lo) come (in Before order) before everything in [lo, hi) and
// weigh `above` < target; the nucleus ends within (lo, hi]. Each round partitions [lo, hi) around a pivot (the
// median of three by Before) and keeps the side holding the end.
size_t Sampler::SelectNucleus(size_t keep, double target) {
  const auto at = [this](size_t i) { return candidates_.begin() + static_cast<std::ptrdiff_t>(i); };
  const auto weight = [this](const std::pair<float, int32_t>& c) { return static_cast<double>(weights_[c.second]); };
  size_t lo = 0;
  size_t hi = keep;
  double above = 0.0;
  while (hi - lo > 1) {
    std::pair<float, int32_t> a = *at(lo), b = *at(lo + (hi - lo) / 2), c = *at(hi - 1);
    if (Before{}(b, a)) std::swap(a, b);
    if (Before{}(c, b)) std::swap(b, c);
    if (Before{}(b, a)) std::swap(a, b);
    const std::pair<float, int32_t> pivot = b;
    const auto mid = std::partition(at(lo), at(hi), [&](const auto& x) { return Before{}(x, pivot); });
    const auto m = static_cast<size_t>(mid - candidates_.begin());
    double upper = 0.0;
    for (size_t i = lo; i < m; ++i) upper += weight(candidates_[i]);
    if (above + upper >= target) {  // the end is among those before the pivot (m > lo: above alone < target)
      hi = m;
      continue;
    }
    std::iter_swap(mid, std::find(mid, at(hi), pivot));  // the pivot right after those before it
    above += upper + weight(pivot);
    lo = m + 1;
    if (above >= target) return lo;  // the pivot completes it
  }
  return hi;  // one candidate left: the end is after it (or, by rounding, everything was taken)
}

}  // namespace sluice
