// The JSON report of a run (--json FILE): configuration, results (overall and per model), latency
// percentiles in milliseconds, SLO verdicts, cost, the server's figures, verification, a per-second
// timeline, the latency histogram and sweep steps. Absent figures are omitted, never written as 0.
// Field names are stable: --compare and scripts read them (schema: "sluice-loadtest/1").
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "loadtest/report/report.h"

namespace sluice::loadtest {

std::string ReportToJson(const Report& report);
absl::Status WriteReportJson(const Report& report, const std::string& path);

}  // namespace sluice::loadtest
