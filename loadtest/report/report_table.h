// The human-readable end of a run: the final table (per model and total: requests, ok, errors, req/s,
// audio-s/s (RTFx), latency percentiles, goodput), errors by gRPC code, cost, the server's queue/compute
// breakdown, memory and load/warm time (or "not reported"), verification, SLO verdicts and the sweep.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "loadtest/report/report.h"

namespace sluice::loadtest {

std::string FormatReport(const Report& report);
// The --verify lines alone (also part of FormatReport).
std::string FormatVerify(const std::vector<VerifyReport>& verify);
// Human units: "1.23 GiB", "512 MiB".
std::string FormatBytes(double bytes);

}  // namespace sluice::loadtest
