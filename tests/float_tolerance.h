// How tests compare float results of two graph shapes (a padded bucket against the unpadded reference, batch 4
// against batch 1, prompt bucket 64 against 128, a graph against eager PyTorch).
//
// Two shapes run different BLAS kernels — OpenBLAS picks them per shape and per CPU (Intel, AMD,
// OPENBLAS_CORETYPE) — so their sums are rounded in another order and differ by float rounding that grows with
// the magnitude of the values: on llama_tiny's logits (~30) an AMD EPYC gave 2.4e-5 between two prompt buckets.
// A fixed absolute tolerance is therefore too tight for large values and too loose for small ones, and bit-exact
// equality holds only by luck. The bound is scaled to the reference's largest magnitude:
//   max |got - want| <= kCrossShapeAtol + kCrossShapeRtol * max |want|
// The same rule (and constants) is in backend/compile/float_tolerance.py for the Python checks.
// Padding bugs show up as errors of the order of the values themselves, far above this bound.
// Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

namespace sluice::testing {

// ~84 float32 ulps of the largest value: several times the rounding spread seen across CPUs.
inline constexpr double kCrossShapeRtol = 1e-5;
// Floor for tensors whose values are all near zero.
inline constexpr double kCrossShapeAtol = 1e-5;

inline double MaxMagnitude(std::span<const float> values) {
  double m = 0;
  for (float v : values) m = std::max(m, static_cast<double>(std::abs(v)));
  return m;
}

// Greedy decoding picks the top logit: two logits each off by at most the bound above can only swap where their
// reference top-2 margin is below twice it (2 x 5e-4 for logits up to ~50). A generated token may differ from the
// reference only there. The same value as NEAR_TIE in backend/compile/float_tolerance.py.
inline constexpr double kNearTieMargin = 1e-3;

// The largest difference allowed between `want` (the reference) and the same values computed by another shape.
inline double CrossShapeTolerance(std::span<const float> want) {
  return kCrossShapeAtol + kCrossShapeRtol * MaxMagnitude(want);
}

}  // namespace sluice::testing
