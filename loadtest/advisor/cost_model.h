// What one padded batch costs, as the bucket advisor models it: the compute time of a (batch B, length L) graph
//   time(B, L) = a + b·B·L + c·B·L²      (seconds; L in the model's steps)
// a: fixed per-execution overhead (launch, copies); b: work linear in the padded steps (convolutions, MLPs);
// c: work quadratic in the length (attention). A request padded to L costs time(B, L) / B when batches are full.
// The coefficients are given, or fitted by non-negative least squares to measured (B, L, time) points.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::advisor {

struct CostModel {
  double a = 0;
  double b = 0;
  double c = 0;

  double BatchSeconds(int batch_size, int64_t length) const;
  // time(B, L) / B: one request's share of a full batch.
  double RequestSeconds(int batch_size, int64_t length) const;
  std::string ToString() const;  // "a + b·B·L + c·B·L²" with the numbers
};

// For illustration when nothing is measured: 2 ms per execution, 0.1 µs per padded step, 1e-13 s per step²
// (a 16 s utterance at 16 kHz, B = 1: 2 + 25.6 + 6.6 ms).
inline constexpr CostModel kDefaultCostModel{0.002, 1e-7, 1e-13};

// "a,b,c" (seconds). Errors name the bad part.
absl::StatusOr<CostModel> ParseCostModel(const std::string& text);

struct TimingPoint {
  int batch_size = 1;
  int64_t length = 0;
  double seconds = 0;
};

// Non-negative least squares over the points (a, b, c >= 0; columns 1, B·L, B·L² scaled to unit size, Householder
// QR on each subset of the terms, the best feasible one kept: exact for three terms), minimising the squared error
// in seconds. A term the timings would make negative is dropped (0) and the others refitted without it.
// REQUIRES: points that pin down all three coefficients (e.g. at least 3 distinct lengths); else InvalidArgument
// saying so. Finite, positive seconds.
absl::StatusOr<CostModel> FitCostModel(const std::vector<TimingPoint>& points);

// Whether time(B, L) is positive and never decreases over lengths in [1, max_length] (a fitted negative b or c
// can make it dip; the advisor then warns that its choice relies on an implausible model).
bool NondecreasingUpTo(const CostModel& model, int batch_size, int64_t max_length);

}  // namespace sluice::advisor
