// The run as a plain SVG file (no plotting library): latency percentiles (p50/p95/p99) over time, the latency
// histogram (log-spaced bins), and — after a sweep — the latency–throughput curve with each step's SLO verdict.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "loadtest/report/report.h"

namespace sluice::loadtest {

std::string RenderSvg(const Report& report);
absl::Status WriteSvg(const Report& report, const std::string& path);

}  // namespace sluice::loadtest
