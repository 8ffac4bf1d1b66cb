// The bucket advisor's traffic from a running sluice-server: its `sluice_request_length` histogram (each
// request's real length in the model's steps; boundaries ~5 % apart up to the largest compiled length, plus every
// compiled length) of one model, read from a /metrics page and turned into weighted lengths.
//
// A histogram says only that a request lay in (previous boundary, boundary], so each bucket's requests are placed
// at its upper bound (the largest integer length ≤ the boundary): the safe choice, since every request then fits
// the bucket the advice gives it; the price is that real lengths count up to one histogram bucket long. The server
// refuses requests longer than its largest bucket before counting them, so the histogram never holds them; any
// requests only in the +Inf bucket (another exporter) have unknown lengths: counted apart and left out.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/advisor/observed_lengths.h"
#include "loadtest/monitor/prometheus_text.h"

namespace sluice::advisor {

inline constexpr char kRequestLengthMetric[] = "sluice_request_length";

struct HistogramLengths {
  std::string model;                // "" when the histogram has no model label
  std::vector<LengthCount> counts;  // ascending; one per histogram bucket holding requests, at its upper bound
  int64_t requests = 0;             // in counts
  int64_t beyond_largest = 0;       // only in +Inf: longer than largest_boundary, unknown length, left out
  int64_t largest_boundary = 0;     // the largest finite boundary, as a length
  int64_t boundaries = 0;           // finite boundaries in the histogram

  // "sluice_request_length of model 'm' in <source> (N boundaries up to L)", for the report.
  std::string Describe(const std::string& source_name) const;
  // The caveats of histogram input (upper-bound placement; requests left out), for the report's notes.
  std::vector<std::string> Notes() const;
};

// `model` empty: the histogram's only model (several: an error listing them). Errors name `source_name` and say
// what is wrong: no such histogram, the model absent (listing those present), a bucket without a numeric `le`,
// cumulative counts that decrease, or no requests yet.
absl::StatusOr<HistogramLengths> LengthsFromHistogram(const loadtest::PromScrape& scrape, const std::string& model,
                                                      const std::string& source_name);
// The same from /metrics text (a parse error names the line).
absl::StatusOr<HistogramLengths> LengthsFromMetricsText(absl::string_view text, const std::string& model,
                                                        const std::string& source_name);

}  // namespace sluice::advisor
