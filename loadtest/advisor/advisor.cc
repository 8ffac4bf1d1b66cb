#include "loadtest/advisor/advisor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "loadtest/advisor/bucket_dp.h"
#include "loadtest/advisor/observed_lengths.h"

namespace sluice::advisor {

std::string Advice::ConfigLine() const {
  std::string line = absl::StrCat("buckets: {lengths: [", absl::StrJoin(bucket_lengths, ", "), "]");
  if (!input.batch_sizes.empty()) absl::StrAppend(&line, ", batch_sizes: [", absl::StrJoin(input.batch_sizes, ", "), "]");
  return line + "}";
}

PlanRow EvaluatePlan(const std::string& name, const std::vector<int64_t>& bucket_lengths,
                     const std::vector<LengthCount>& sorted_counts, const CostModel& cost, int batch_size,
                     int graphs_per_length) {
  PlanRow row;
  row.name = name;
  row.lengths = bucket_lengths;
  row.graphs = static_cast<int>(bucket_lengths.size()) * graphs_per_length;
  for (int64_t l : bucket_lengths) row.buckets.push_back({l, 0, 0});
  double seconds = 0;
  // Both sorted: walk the buckets along the lengths.
  size_t b = 0;
  for (const LengthCount& c : sorted_counts) {
    while (b < bucket_lengths.size() && bucket_lengths[b] < c.length) ++b;
    if (b == bucket_lengths.size()) {
      row.refused += c.count;
      continue;
    }
    loadtest::BucketShare& fill = row.buckets[b];
    const double steps = static_cast<double>(c.length) * static_cast<double>(c.count);
    fill.requests += c.count;
    fill.real_steps += steps;
    row.requests += c.count;
    row.real_steps += steps;
    row.padded_steps += static_cast<double>(fill.length) * static_cast<double>(c.count);
  }
  for (const loadtest::BucketShare& fill : row.buckets) {
    seconds += static_cast<double>(fill.requests) * cost.RequestSeconds(batch_size, fill.length);
  }
  row.seconds_per_request = row.requests > 0 ? seconds / static_cast<double>(row.requests) : 0;
  return row;
}

std::vector<int64_t> PowersOfTwo(int64_t max_length, int count, int64_t unit) {
  int64_t top = unit;
  while (top < max_length) top *= 2;
  std::vector<int64_t> lengths;
  for (int i = 0; i < count && top >= unit && top % unit == 0; ++i, top /= 2) lengths.push_back(top);
  std::reverse(lengths.begin(), lengths.end());
  return lengths;
}

namespace {

// The observed lengths as merged counts, each length over --max-length counted at it (`clipped`: how many were).
absl::StatusOr<std::vector<LengthCount>> ObservedCounts(AdvisorInput& input, int64_t& clipped) {
  if (input.lengths.empty() && input.counted.empty()) return absl::InvalidArgumentError("no observed lengths");
  if (input.batch_size < 1 || input.max_buckets < 1 || input.multiple_of < 1 || input.max_candidates < 1) {
    return absl::InvalidArgumentError("batch size, max buckets, multiple-of and max candidates must be >= 1");
  }
  std::vector<LengthCount> counts = std::move(input.counted);
  for (int64_t l : input.lengths) counts.push_back({l, 1});
  input.lengths.clear();
  input.counted.clear();
  for (const LengthCount& c : counts) {
    if (c.length < 1) return absl::InvalidArgumentError("lengths must be positive");
    if (c.count < 0) return absl::InvalidArgumentError("request counts must not be negative");
  }
  clipped = 0;
  if (input.clip_to > 0) {
    for (LengthCount& c : counts) {
      if (c.length > input.clip_to) {
        c.length = input.clip_to;
        clipped += c.count;
      }
    }
  }
  std::vector<LengthCount> sorted = MergeLengthCounts(std::move(counts));
  if (sorted.empty()) return absl::InvalidArgumentError("no observed requests (every count is 0)");
  return sorted;
}

// The cut-point problem over the candidates: each candidate's requests and cost per request (finite, >= 0).
absl::StatusOr<BucketProblem> MakeProblem(const AdvisorInput& input, const Candidates& candidates, int64_t requests) {
  BucketProblem problem;
  problem.requests = candidates.requests;
  for (int64_t l : candidates.lengths) problem.cost_per_request.push_back(input.cost.RequestSeconds(input.batch_size, l));
  for (size_t i = 0; i < candidates.lengths.size(); ++i) {
    if (!std::isfinite(problem.cost_per_request[i]) || problem.cost_per_request[i] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cost model %s (%s) gives %g s per request at length %d, B = %d: a cost must be finite and >= 0 (give "
          "non-negative a, b, c with --cost-model, or timings with --bench-json)",
          input.cost.ToString(), input.cost_source, problem.cost_per_request[i], candidates.lengths[i],
          input.batch_size));
    }
  }
  problem.max_buckets = input.max_buckets;
  problem.per_bucket_penalty = input.per_bucket_penalty * static_cast<double>(requests);
  return problem;
}

// The notes on how the advice was reached: clipped lengths, merged candidates, a cost model that is not increasing.
void AddSolutionNotes(const AdvisorInput& input, const Candidates& candidates, int64_t clipped, Advice& advice) {
  if (clipped > 0) {
    advice.notes.push_back(absl::StrFormat("%d of %d lengths were longer than %d and count as %d (--max-length)",
                                           clipped, advice.requests, input.clip_to, input.clip_to));
  }
  if (candidates.merged) {
    advice.notes.push_back(absl::StrFormat(
        "%d distinct lengths merged into %d quantile candidates (--max-candidates): the optimum is exact over "
        "those candidates, not over every length",
        candidates.distinct_lengths, candidates.lengths.size()));
  }
  if (!NondecreasingUpTo(input.cost, input.batch_size, candidates.lengths.back())) {
    advice.notes.push_back(absl::StrCat("the cost model (", input.cost.ToString(),
                                        ") is not positive and increasing over the observed lengths: the advice "
                                        "follows it, but check the timings"));
  }
}

// The current bucket lengths sorted and distinct; InvalidArgument when one is not positive.
absl::Status NormalizeCurrent(std::vector<int64_t>& current) {
  for (int64_t c : current) {
    if (c < 1) return absl::InvalidArgumentError("current bucket lengths must be positive");
  }
  std::sort(current.begin(), current.end());
  current.erase(std::unique(current.begin(), current.end()), current.end());
  return absl::OkStatus();
}

// The advised plan and the ones it is compared with: current (if given), powers of two, pad-to-max.
void AddPlans(const AdvisorInput& input, const std::vector<LengthCount>& sorted, const Candidates& candidates,
              Advice& advice) {
  const int per_length = input.batch_sizes.empty() ? 1 : static_cast<int>(input.batch_sizes.size());
  const auto evaluate = [&](const std::string& name, const std::vector<int64_t>& lengths) {
    return EvaluatePlan(name, lengths, sorted, input.cost, input.batch_size, per_length);
  };
  advice.plans.push_back(evaluate("advised", advice.bucket_lengths));
  if (!input.current.empty()) {
    advice.plans.push_back(evaluate("current", input.current));
    if (advice.plans.back().refused > 0) {
      advice.notes.push_back(absl::StrFormat(
          "current: %d of %d requests (%.1f %%) are longer than its largest bucket %d and would be refused; its "
          "figures cover the rest only",
          advice.plans.back().refused, advice.requests, 100.0 * advice.plans.back().refused / advice.requests,
          input.current.back()));
    }
  }
  const int64_t unit = input.pow2_unit > 0 ? input.pow2_unit : input.multiple_of;
  const int count = static_cast<int>(advice.bucket_lengths.size());
  advice.plans.push_back(evaluate(unit == 1 ? "powers of two" : absl::StrCat("powers of two x", unit),
                                  PowersOfTwo(advice.max_length, count, unit)));
  if (static_cast<int>(advice.plans.back().lengths.size()) < count) {
    advice.notes.push_back(absl::StrCat("powers of two: only ", advice.plans.back().lengths.size(),
                                        " lengths fit between the unit ", unit, " and the largest"));
  }
  advice.plans.push_back(evaluate("pad-to-max", {candidates.lengths.back()}));  // the max, rounded up
}

}  // namespace

absl::StatusOr<Advice> Advise(AdvisorInput input) {
  int64_t clipped = 0;
  absl::StatusOr<std::vector<LengthCount>> sorted = ObservedCounts(input, clipped);
  if (!sorted.ok()) return sorted.status();

  Advice advice;
  advice.notes = std::move(input.lengths_notes);
  input.lengths_notes.clear();
  for (const LengthCount& c : *sorted) advice.requests += c.count;
  advice.max_length = sorted->back().length;
  const Candidates candidates = BuildCandidates(*sorted, input.multiple_of, input.max_candidates);
  advice.distinct_lengths = candidates.distinct_lengths;
  advice.candidates = static_cast<int64_t>(candidates.lengths.size());
  advice.candidates_merged = candidates.merged;

  absl::StatusOr<BucketProblem> problem = MakeProblem(input, candidates, advice.requests);
  if (!problem.ok()) return problem.status();
  absl::StatusOr<BucketSolution> solution = SolveBuckets(*problem);
  if (!solution.ok()) {  // e.g. a given cost model that is negative somewhere: name it and where it came from
    return absl::Status(solution.status().code(),
                        absl::StrCat("cost model ", input.cost.ToString(), " (", input.cost_source, "), B = ",
                                     input.batch_size, ": ", solution.status().message()));
  }
  for (size_t i : solution->chosen) advice.bucket_lengths.push_back(candidates.lengths[i]);
  AddSolutionNotes(input, candidates, clipped, advice);
  if (absl::Status s = NormalizeCurrent(input.current); !s.ok()) return s;
  AddPlans(input, *sorted, candidates, advice);
  advice.input = std::move(input);
  return advice;
}

}  // namespace sluice::advisor
