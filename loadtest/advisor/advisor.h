// sluice-advisor's core: from one model's observed request lengths and a cost model, the bucket lengths that
// minimise expected compute per request under a graph budget (BucketProblem solved exactly), and the same
// traffic evaluated on the alternatives: the current config, powers of two with the same bucket count, and
// pad-to-max. No I/O (advisor_main.cc reads files; advisor_report.h prints and writes JSON).
//
// Expected compute per request of a bucket choice, at batch size B with full batches:
//   (1/n) Σ over served requests of time(B, bucket(length)) / B,   bucket(l) = smallest bucket ≥ l
// predicted throughput per instance = 1 / that; padding efficiency = Σ real steps / Σ bucket steps. Requests
// longer than the largest bucket are refused by the server: counted apart and left out of those figures.
//
// Thread-safety: pure functions and plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/advisor/cost_model.h"
#include "loadtest/advisor/observed_lengths.h"
#include "loadtest/core/bucket_share.h"

namespace sluice::advisor {

struct AdvisorInput {
  std::vector<int64_t> lengths;        // observed request lengths, in steps (positive)
  std::vector<LengthCount> counted;    // and/or lengths with their request counts (e.g. a histogram's buckets)
  std::string lengths_source;          // where the lengths came from, for the report ("" = not said)
  std::vector<std::string> lengths_notes;  // the reader's caveats (upper-bound placement, resampling, ...)
  CostModel cost;
  std::string cost_source;             // how `cost` was obtained, for the report
  int batch_size = 1;                  // B in the cost model
  std::vector<int> batch_sizes;        // the model's compiled batch sizes (graphs = lengths × these); may be empty
  int max_buckets = 4;                 // K ≥ 1
  int64_t multiple_of = 1;             // candidate lengths are rounded up to this granularity
  int64_t max_candidates = 2000;       // more distinct lengths are merged into this many quantile groups
  double per_bucket_penalty = 0;       // seconds per request added per chosen bucket (0: just the budget)
  int64_t pow2_unit = 0;               // powers of two are unit·2^k; 0 = multiple_of
  int64_t clip_to = 0;                 // > 0: longer observed lengths count as this (as sluice-loadtest clips)
  std::vector<int64_t> current;        // the current config's lengths (ascending); empty = no such row
  std::string current_source;
  std::optional<int> sample_rate;      // speech models: lengths also shown in seconds
  std::string model_name;              // for the re-export command in the report ("" = not known)
};

struct PlanRow {
  std::string name;  // "advised", "current", "powers of two", "pad-to-max"
  std::vector<int64_t> lengths;
  int graphs = 0;    // lengths × compiled batch sizes
  int64_t requests = 0;  // served (fit in some bucket)
  int64_t refused = 0;   // longer than the largest bucket
  double real_steps = 0;
  double padded_steps = 0;
  double seconds_per_request = 0;
  std::vector<loadtest::BucketShare> buckets;  // one per length, refused requests in none

  double efficiency() const { return padded_steps > 0 ? real_steps / padded_steps : 0; }
  double throughput_rps() const { return seconds_per_request > 0 ? 1 / seconds_per_request : 0; }
};

struct Advice {
  AdvisorInput input;  // lengths and counted dropped (not echoed back)
  int64_t requests = 0;
  int64_t max_length = 0;
  int64_t distinct_lengths = 0;  // after rounding to multiple_of
  int64_t candidates = 0;
  bool candidates_merged = false;
  std::vector<int64_t> bucket_lengths;  // the advice
  std::vector<PlanRow> plans;           // advised first, then current (if given), powers of two, pad-to-max
  std::vector<std::string> notes;       // caveats worth printing (the reader's first, then merged candidates,
                                        // an implausible cost model, ...)

  // `buckets: {lengths: [...], batch_sizes: [...]}` for config.yaml (batch sizes only when known).
  std::string ConfigLine() const;
};

// Evaluates one bucket choice on the observed lengths. REQUIRES: bucket_lengths ascending, non-empty; counts
// ascending by length (MergeLengthCounts).
PlanRow EvaluatePlan(const std::string& name, const std::vector<int64_t>& bucket_lengths,
                     const std::vector<LengthCount>& sorted_counts, const CostModel& cost, int batch_size,
                     int graphs_per_length);

// unit·2^k lengths, `count` of them (fewer if they would go below unit), the largest the first ≥ max_length.
std::vector<int64_t> PowersOfTwo(int64_t max_length, int count, int64_t unit);

// REQUIRES: positive lengths (plain and counted together non-empty, counts ≥ 0), batch_size ≥ 1,
// max_buckets ≥ 1, multiple_of ≥ 1, max_candidates ≥ 1.
absl::StatusOr<Advice> Advise(AdvisorInput input);

}  // namespace sluice::advisor
