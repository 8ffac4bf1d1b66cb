// --compare a.json b.json: two runs' JSON reports side by side — throughput, latency percentiles, errors,
// goodput, cost, the server's memory and load/warm time, correctness — with the ratio b/a and which side is
// better for each figure. Figures one report lacks show as "-".
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace sluice::loadtest {

// The table for two JSON report texts; `label_a`/`label_b` head the columns (e.g. the file names).
absl::StatusOr<std::string> CompareReports(const std::string& json_a, const std::string& json_b,
                                           const std::string& label_a, const std::string& label_b);
absl::StatusOr<std::string> CompareReportFiles(const std::string& path_a, const std::string& path_b);

}  // namespace sluice::loadtest
