// The token sampler: picks the next token id from one row of logits by a TokenPick, the rules every place that
// picks tokens follows: the generation engine on the host (from a request's SamplingParams,
// scheduler/generation_request.h), the sim device when it picks (sim_generation_backend.h), and, in torch ops, the
// TorchScript backend on its device (torch_token_pick.h).
//   temperature 0: greedy, the argmax (ties go to the lowest id); no draw is used.
//   otherwise: logits / temperature, keep the top_k highest (0: all), then the smallest set of those, taken by
//   descending probability (ties by ascending id), whose probability reaches top_p (1: all), and draw one: u =
//   uniform x the kept weight, and the kept id, walking ids in ascending order, where the cumulative weight first
//   exceeds u (any fixed walk draws from the same softmax; id order needs no sorting). The uniform is 53 bits of one
//   64-bit generator output (Uniform; no std distribution, whose algorithm is the library's choice), so a seed gives
//   the same tokens on every build; every sampled token takes exactly one output, also from a row with nothing to
//   draw from.
// NaN logits count as -infinity. A row whose every logit is -infinity or NaN yields the lowest id among them (0).
// Thread-safety: a Sampler holds scratch space; use one per thread (each engine thread owns one). TokenPick is a
// value.
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace sluice {

// How one row's next token is picked.
struct TokenPick {
  float temperature = 0.0f;  // 0: the argmax
  int32_t top_k = 0;         // 0: no cut-off
  float top_p = 1.0f;        // 1: no cut-off
  double uniform = 0.0;      // in [0, 1): the draw (Sampler::Uniform); unused when greedy
};

class Sampler {
 public:
  // REQUIRES: !logits.empty(); pick validated (temperature >= 0 and finite, top_p in (0, 1], top_k >= 0,
  // uniform in [0, 1)).
  int32_t Sample(absl::Span<const float> logits, const TokenPick& pick);
  // The same with the draw taken from `rng` (one output, none when greedy) instead of pick.uniform.
  int32_t Sample(absl::Span<const float> logits, TokenPick pick, std::mt19937_64& rng) {
    if (pick.temperature > 0.0f) pick.uniform = Uniform(rng);
    return Sample(logits, pick);
  }

  // A draw's uniform in [0, 1): the top 53 bits of one generator output. The engine takes it before a step, so the
  // same draw picks the token on the host or on a device that picks (backend/generation_backend.h).
  static double Uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

  // The argmax of `logits`, lowest id on ties, NaN ignored.
  static int32_t Greedy(absl::Span<const float> logits);

 private:
  int32_t SampleTopK(absl::Span<const float> logits, float inverse_temperature, size_t k, float top_p,
                     double uniform);
  // Moves the top-p set of candidates_[0, keep) (the smallest prefix in descending-logit, ascending-id order that
  // weighs >= target) to candidates_[0, end), in no particular order, and returns end.
  size_t SelectNucleus(size_t keep, double target);
  // Top-p alone (weights_ has every id's weight): moves the top-p set to candidates_[0, end), returns end.
  size_t CandidatesForTopP(absl::Span<const float> logits, float inverse_temperature, float top_p);
  // The draw among candidates_[0, keep), their weights in weights_; or among every id.
  int32_t DrawAmongCandidates(size_t keep, double uniform);
  int32_t DrawById(double uniform);

  // Scratch space, reused between calls.
  std::vector<float> weights_;                         // softmax weight by id (with top-k: the kept ids' only)
  std::vector<float> cut_;                             // a cut-off's weights by id, 0 outside it, swapped in
  std::vector<std::pair<float, int32_t>> candidates_;  // (scaled logit, id), for the cut-offs' selections
};

}  // namespace sluice
