#include "loadtest/advisor/metrics_lengths.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace sluice::advisor {
namespace {

// A bucket's `le` as a number ("+Inf" included).
bool ParseBound(const std::string& le, double* out) {
  if (le == "+Inf" || le == "Inf") {
    *out = INFINITY;
    return true;
  }
  return absl::SimpleAtod(le, out) && !std::isnan(*out);
}

// Prometheus values are doubles; request counts are whole numbers (half a request is rounding noise).
int64_t Whole(double count) { return static_cast<int64_t>(std::llround(count)); }

}  // namespace

std::string HistogramLengths::Describe(const std::string& source_name) const {
  return absl::StrCat(kRequestLengthMetric, model.empty() ? "" : absl::StrCat(" of model '", model, "'"), " in ",
                      source_name, " (", boundaries, " boundaries up to ", largest_boundary, ")");
}

std::vector<std::string> HistogramLengths::Notes() const {
  std::vector<std::string> notes;
  notes.push_back(
      "lengths from a histogram: each of its buckets' requests is placed at the bucket's upper bound (safe: every "
      "request fits the bucket the advice gives it), so the advice picks among its boundaries and real lengths, "
      "and with them every plan's padding efficiency, are overstated by up to one histogram bucket (~5 %)");
  notes.push_back(absl::StrFormat(
      "a sluice-server refuses requests longer than its largest bucket (%d here) before counting them (they show "
      "only in sluice_requests_total{outcome=\"invalid\"}), so the advice cannot reach past it",
      largest_boundary));
  if (beyond_largest > 0) {
    notes.push_back(absl::StrFormat(
        "%d requests were counted only in +Inf, longer than the histogram's largest boundary %d; their lengths are "
        "unknown and they are left out",
        beyond_largest, largest_boundary));
  }
  return notes;
}

absl::StatusOr<HistogramLengths> LengthsFromHistogram(const loadtest::PromScrape& scrape, const std::string& model,
                                                      const std::string& source_name) {
  const std::string bucket_name = absl::StrCat(kRequestLengthMetric, "_bucket");
  bool any = false;
  for (const loadtest::PromSample& s : scrape.samples) any = any || s.name == bucket_name;
  if (!any) {
    return absl::NotFoundError(absl::StrCat(source_name, ": no ", kRequestLengthMetric,
                                            " histogram (not a sluice-server /metrics page, or a server too old to "
                                            "export it)"));
  }
  const std::vector<std::string> models = scrape.LabelValues(bucket_name, "model");
  HistogramLengths out;
  if (!model.empty()) {
    if (std::find(models.begin(), models.end(), model) == models.end()) {
      return absl::NotFoundError(absl::StrCat(source_name, ": ", kRequestLengthMetric, " has no model '", model,
                                              "' (it has: ", models.empty() ? "none named" : absl::StrJoin(models, ", "),
                                              ")"));
    }
    out.model = model;
  } else if (models.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", kRequestLengthMetric, " holds several models (",
                                                   absl::StrJoin(models, ", "), "); name one with --model"));
  } else if (models.size() == 1) {
    out.model = models.front();
  }

  // Cumulative count per boundary, summed over the model's series (one per server; more if scrapes were joined).
  std::map<double, double> cumulative;
  for (const loadtest::PromSample& s : scrape.samples) {
    if (s.name != bucket_name || s.Label("model") != out.model) continue;
    double bound = 0;
    if (!ParseBound(s.Label("le"), &bound)) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": a ", bucket_name, " sample has le=\"",
                                                     s.Label("le"), "\", not a number"));
    }
    if (!std::isfinite(s.value) || s.value < 0) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", bucket_name, "{le=\"", s.Label("le"),
                                                     "\"} is ", s.value, ", not a request count"));
    }
    cumulative[bound] += s.value;
  }
  double previous = 0;
  for (const auto& [bound, count] : cumulative) {
    if (count < previous - 0.5) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", bucket_name, " counts decrease at le=\"",
                                                     bound, "\" (", previous, " then ", count,
                                                     "): not a cumulative histogram"));
    }
    const int64_t in_bucket = Whole(count - previous);
    previous = std::max(previous, count);
    if (std::isinf(bound)) {
      out.beyond_largest = in_bucket;
      continue;
    }
    // Lengths are whole steps: the largest that fits under the boundary (at least 1).
    const int64_t length = std::max<int64_t>(1, static_cast<int64_t>(std::floor(bound + 1e-9)));
    ++out.boundaries;
    out.largest_boundary = length;
    if (in_bucket > 0) {
      out.counts.push_back({length, in_bucket});
      out.requests += in_bucket;
    }
  }
  out.counts = MergeLengthCounts(std::move(out.counts));  // boundaries below 1 all land on 1
  if (out.requests == 0) {
    const std::string whose = out.model.empty() ? "" : absl::StrCat(" of model '", out.model, "'");
    if (out.beyond_largest > 0) {
      return absl::InvalidArgumentError(absl::StrCat(source_name, ": every one of the ", out.beyond_largest,
                                                     " requests in ", kRequestLengthMetric, whose,
                                                     " is longer than its largest boundary ", out.largest_boundary));
    }
    return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", kRequestLengthMetric, whose,
                                                   " is empty: the server has counted no requests yet (send traffic, "
                                                   "then read /metrics again)"));
  }
  return out;
}

absl::StatusOr<HistogramLengths> LengthsFromMetricsText(absl::string_view text, const std::string& model,
                                                        const std::string& source_name) {
  absl::StatusOr<loadtest::PromScrape> scrape = loadtest::ParsePrometheusText(text);
  if (!scrape.ok()) return absl::InvalidArgumentError(absl::StrCat(source_name, ": ", scrape.status().message()));
  return LengthsFromHistogram(*scrape, model, source_name);
}

}  // namespace sluice::advisor
