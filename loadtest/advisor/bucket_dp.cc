#include "loadtest/advisor/bucket_dp.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace sluice::advisor {
namespace {

absl::Status Validate(const BucketProblem& p) {
  if (p.requests.empty()) return absl::InvalidArgumentError("no candidate lengths");
  if (p.requests.size() != p.cost_per_request.size()) {
    return absl::InvalidArgumentError(absl::StrCat(p.requests.size(), " request counts but ",
                                                   p.cost_per_request.size(), " costs"));
  }
  if (p.max_buckets < 1) return absl::InvalidArgumentError("max_buckets must be at least 1");
  if (!std::isfinite(p.per_bucket_penalty) || p.per_bucket_penalty < 0) {
    return absl::InvalidArgumentError("per_bucket_penalty must be finite and non-negative");
  }
  for (size_t i = 0; i < p.requests.size(); ++i) {
    if (!std::isfinite(p.requests[i]) || p.requests[i] < 0 || !std::isfinite(p.cost_per_request[i]) ||
        p.cost_per_request[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("candidate ", i, ": requests and cost must be finite and >= 0"));
    }
  }
  return absl::OkStatus();
}

// prefix[j + 1] = requests[0] + ... + requests[j]; run cost of candidates i..j padded to j's length. The DP and
// PartitionCost both use this exact expression, so their sums agree bit for bit.
std::vector<double> Prefix(const std::vector<double>& requests) {
  std::vector<double> prefix(requests.size() + 1, 0.0);
  for (size_t j = 0; j < requests.size(); ++j) prefix[j + 1] = prefix[j] + requests[j];
  return prefix;
}

double RunCost(const std::vector<double>& prefix, const std::vector<double>& cost, size_t i, size_t j) {
  return (prefix[j + 1] - prefix[i]) * cost[j];
}

}  // namespace

double PartitionCost(const BucketProblem& problem, const std::vector<size_t>& chosen) {
  const std::vector<double> prefix = Prefix(problem.requests);
  double total = 0;
  size_t start = 0;
  for (size_t end : chosen) {
    total = total + RunCost(prefix, problem.cost_per_request, start, end);
    start = end + 1;
  }
  return total;
}

absl::StatusOr<BucketSolution> SolveBuckets(const BucketProblem& problem) {
  if (absl::Status s = Validate(problem); !s.ok()) return s;
  const size_t n = problem.requests.size();
  const size_t max_k = std::min<size_t>(static_cast<size_t>(problem.max_buckets), n);
  const std::vector<double> prefix = Prefix(problem.requests);
  const std::vector<double>& cost = problem.cost_per_request;
  constexpr double kInf = std::numeric_limits<double>::infinity();

  // best[k - 1][j]: least cost of candidates 0..j in exactly k runs, the last ending at j;
  // start[k - 1][j]: where that last run starts.
  std::vector<std::vector<double>> best(max_k, std::vector<double>(n, kInf));
  std::vector<std::vector<size_t>> start(max_k, std::vector<size_t>(n, 0));
  for (size_t j = 0; j < n; ++j) best[0][j] = RunCost(prefix, cost, 0, j);
  for (size_t k = 2; k <= max_k; ++k) {
    for (size_t j = k - 1; j < n; ++j) {
      double least = kInf;
      size_t arg = j;
      for (size_t i = k - 1; i <= j; ++i) {  // the last run is i..j; k - 1 runs cover 0..i-1
        const double v = best[k - 2][i - 1] + RunCost(prefix, cost, i, j);
        if (v < least) {
          least = v;
          arg = i;
        }
      }
      best[k - 1][j] = least;
      start[k - 1][j] = arg;
    }
  }

  size_t k_best = 1;
  double objective = kInf;
  for (size_t k = 1; k <= max_k; ++k) {
    const double v = best[k - 1][n - 1] + problem.per_bucket_penalty * static_cast<double>(k);
    if (v < objective) {
      objective = v;
      k_best = k;
    }
  }
  BucketSolution solution;
  solution.total_cost = best[k_best - 1][n - 1];
  solution.objective = objective;
  size_t end = n - 1;
  for (size_t k = k_best; k >= 1; --k) {
    solution.chosen.push_back(end);
    if (k == 1) break;
    end = start[k - 1][end] - 1;
  }
  std::reverse(solution.chosen.begin(), solution.chosen.end());
  return solution;
}

}  // namespace sluice::advisor
