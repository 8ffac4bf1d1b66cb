// A parser for the Prometheus text exposition format (version 0.0.4; OpenMetrics' "# EOF" is accepted), and
// queries over one scrape. Generic: it knows no metric names; callers look series up by name or pattern, and an
// absent series is "not reported", never an error.
// Thread-safety: plain values and pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace sluice::loadtest {

struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;

  // The label's value, or "" when absent.
  std::string Label(absl::string_view key) const;
};

struct PromScrape {
  std::vector<PromSample> samples;
  std::map<std::string, std::string> types;  // family name -> counter | gauge | histogram | summary | untyped

  // Sum of every sample named `name` (all label sets), optionally only those whose label `key` equals `value`.
  // nullopt when no such sample exists.
  std::optional<double> Sum(absl::string_view name, absl::string_view key = {}, absl::string_view value = {}) const;
  std::optional<double> Max(absl::string_view name) const;
  // Distinct values of label `key` on samples named `name`.
  std::vector<std::string> LabelValues(absl::string_view name, absl::string_view key) const;
  // Histogram or summary families: those typed so, plus any base name that has both _sum and _count samples.
  std::vector<std::string> HistogramFamilies() const;
  // Every distinct sample name.
  std::vector<std::string> Names() const;
};

absl::StatusOr<PromScrape> ParsePrometheusText(absl::string_view text);

// GET `url` (http://host:port/path) with cpp-httplib; the body on HTTP 200.
absl::StatusOr<std::string> HttpGet(const std::string& url, double timeout_s, const std::string& bearer_token = "");

}  // namespace sluice::loadtest
