// The generation engine's token sampler: picks the next token id from one row of logits under a request's
// SamplingParams (scheduler/generation_request.h).
//   temperature 0: greedy, the argmax (ties go to the lowest id); the generator is not touched.
//   otherwise: logits / temperature, keep the top_k highest (0: all), then the smallest prefix of those (by
//   descending probability, ties by ascending id) whose probability reaches top_p (1: all), and draw one with
//   the sequence's own generator: one uniform u in [0, total weight), and the candidate where the cumulative
//   weight first exceeds u. With a cut-off the walk goes in the cut-off's order (descending probability, built
//   only as far as the draw goes); without one (top_k 0 or >= the vocabulary, top_p 1) in id order, which
//   draws from the same distribution without ordering anything. The draw uses 53 bits of one 64-bit output (no
//   std distribution, whose algorithm is the library's choice), so a seed gives the same tokens on every build.
// NaN logits count as -infinity. A row whose every logit is -infinity or NaN yields the lowest id among them (0).
// Thread-safety: a Sampler holds scratch space; use one per thread (each engine thread owns one).
#pragma once

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "scheduler/generation_request.h"

namespace sluice {

class Sampler {
 public:
  // REQUIRES: !logits.empty(); params validated (temperature >= 0 and finite, top_p in (0, 1], top_k >= 0).
  int32_t Sample(absl::Span<const float> logits, const SamplingParams& params, std::mt19937_64& rng);

  // The argmax of `logits`, lowest id on ties, NaN ignored.
  static int32_t Greedy(absl::Span<const float> logits);

 private:
  int32_t DrawInIdOrder(absl::Span<const float> logits, float inverse_temperature, std::mt19937_64& rng);
  void OrderThrough(size_t i, size_t keep);

  std::vector<std::pair<float, int32_t>> candidates_;  // (scaled logit, id), reused between calls
  size_t ordered_ = 0;  // candidates_[0, ordered_) are the kept ones' most probable, in draw order
  size_t likely_ = 0;   // candidates_[0, likely_) are those near the maximum logit (unordered past ordered_)
  std::vector<float> weights_;  // DrawInIdOrder's softmax weights by id, reused between calls
};

}  // namespace sluice
