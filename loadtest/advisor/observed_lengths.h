// The bucket advisor's input traffic: the observed request lengths of one model (in the model's steps: samples
// or tokens), read from a file, and their reduction to candidate bucket lengths for the optimiser.
//
// File formats (detected per line): one length per line; CSV (a header row names the columns, or none and
// `column` is a 0-based index, default the first column); JSON lines ({"length": 16000, ...}, key `column`,
// default "length"). Blank lines and lines starting with '#' are skipped. Every error names the file and line.
//
// Thread-safety: pure functions and plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::advisor {

// REQUIRES: `column` is empty (the default: "length" in JSON lines and headed CSV, else the first field), a
// column name, or a 0-based index. Lengths must be positive integers (16000 or 16000.0, not 12.5).
absl::StatusOr<std::vector<int64_t>> ParseLengths(absl::string_view text, const std::string& column,
                                                  const std::string& source_name);
absl::StatusOr<std::vector<int64_t>> ReadLengthsFile(const std::string& path, const std::string& column);

// One observed length and how many requests had it: the weighted form of the traffic (a histogram's buckets,
// or a list of lengths counted), so millions of requests cost one entry per distinct length.
struct LengthCount {
  int64_t length = 0;
  int64_t count = 0;
};

// Ascending by length, equal lengths merged, zero counts dropped.
std::vector<LengthCount> CountLengths(const std::vector<int64_t>& lengths);
std::vector<LengthCount> MergeLengthCounts(std::vector<LengthCount> counts);

// Candidate bucket lengths: the distinct observed lengths (rounded up to a multiple of `multiple_of`), sorted,
// with how many requests land on each and their real steps. When there are more than `max_candidates`, adjacent
// candidates are merged into quantile groups of about equal request counts, each represented by its largest
// length (so every request still fits; the optimum is then exact over the merged candidates only).
struct Candidates {
  std::vector<int64_t> lengths;    // ascending, distinct
  std::vector<double> requests;    // requests whose (rounded) length falls in (previous, this]
  std::vector<double> real_steps;  // their unrounded lengths, summed
  int64_t distinct_lengths = 0;    // before any merging (after rounding)
  bool merged = false;             // true when quantile merging reduced the candidates
};

// REQUIRES: some positive count, positive lengths, multiple_of ≥ 1, max_candidates ≥ 1.
Candidates BuildCandidates(const std::vector<LengthCount>& counts, int64_t multiple_of, int64_t max_candidates);
Candidates BuildCandidates(const std::vector<int64_t>& lengths, int64_t multiple_of, int64_t max_candidates);

}  // namespace sluice::advisor
