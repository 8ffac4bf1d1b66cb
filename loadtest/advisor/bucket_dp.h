// The bucket advisor's optimiser: given the candidate bucket lengths of one model (sorted ascending, e.g. the
// distinct observed request lengths), how many requests would land exactly on each candidate (requests whose
// length lies in (previous candidate, this candidate]), and the compute one request costs when it is padded to
// each candidate, choose at most K candidates as bucket lengths so that the total compute is least. The largest
// candidate is always chosen, so every observed request fits.
//
// Solved exactly by dynamic programming over cut points, O(K·N²) time and O(K·N) memory for N candidates:
//   best[k][j] = min over i ≤ j of best[k-1][i-1] + (W[j] - W[i-1]) · cost[j]
// where W are prefix sums of the request counts: requests in candidates i..j share bucket j. Because the
// lengths are sorted and every request is padded to the smallest bucket that holds it, every partition into
// contiguous runs is a bucket choice and vice versa, so this is the optimum over all subsets of candidates
// (the tests check it against brute force). A per-bucket penalty (added once per chosen bucket) trades graphs
// against compute; with no penalty and a cost nondecreasing in length, more buckets never cost more.
//
// Pure arithmetic, no I/O. Thread-safety: pure functions; safe to call concurrently.
#pragma once

#include <cstddef>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::advisor {

struct BucketProblem {
  // Per candidate, in ascending candidate-length order (the lengths themselves are not needed here):
  std::vector<double> requests;          // requests that land on this candidate (≥ 0)
  std::vector<double> cost_per_request;  // compute of one request padded to this candidate's length
  int max_buckets = 1;                   // K ≥ 1: the graph budget in lengths
  double per_bucket_penalty = 0;         // added to the objective once per chosen bucket (≥ 0)
};

struct BucketSolution {
  std::vector<size_t> chosen;  // candidate indices, ascending; the last is always the last candidate
  double total_cost = 0;       // Σ requests × cost of their bucket (without the penalty)
  double objective = 0;        // total_cost + per_bucket_penalty × chosen.size()
};

// REQUIRES: requests.size() == cost_per_request.size() ≥ 1, max_buckets ≥ 1, finite non-negative inputs.
// Returns InvalidArgument otherwise. Ties are broken towards fewer buckets, then towards smaller indices.
absl::StatusOr<BucketSolution> SolveBuckets(const BucketProblem& problem);

// Σ requests × cost over the partition that `chosen` (ascending candidate indices, last = last candidate)
// defines: the objective of any bucket choice, for comparison rows and tests.
// REQUIRES: chosen is ascending, non-empty and ends at the last candidate.
double PartitionCost(const BucketProblem& problem, const std::vector<size_t>& chosen);

}  // namespace sluice::advisor
