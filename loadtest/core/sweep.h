// Sweep: runs the same workload at rising concurrency or rate (or, for --api riva-streaming, stream count)
// until a step breaks its objectives, and names the highest-throughput step that met them (for streams: the
// largest stream count that met them). A step passes when every SLO verdict passes; for a rate sweep it must
// also deliver at least 90 % of the offered rate (otherwise the server is saturated and queues grow).
// Levels are given, or start × factor^k for k < steps (rounded for concurrency and streams).
// Thread-safety: RunSweep blocks its calling thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/core/slo.h"
#include "loadtest/core/summary.h"

namespace sluice::loadtest {

struct SweepOptions {
  std::string knob;            // "concurrency", "rate" or "streams"
  std::vector<double> levels;  // explicit levels; else start × factor^k
  double start = 1;
  double factor = 2;
  int steps = 6;
  bool stop_at_first_failure = true;
};

// One level of a sweep, as measured and judged (the reports print every step).
struct SweepStep {
  std::string knob;  // "concurrency", "rate" or "streams"
  double level = 0;
  RunSummary summary;
  std::vector<Verdict> verdicts;
  bool pass = true;
};

absl::StatusOr<std::vector<double>> SweepLevels(const SweepOptions& options);

// The verdicts of one step (SLO plus, for rates, the delivered share of the offered rate).
std::vector<Verdict> SweepVerdicts(const SloSpec& slo, const std::string& knob, double level,
                                   const RunSummary& summary);

// Runs `measure(level)` per level; fills `steps` and `best` (highest successful req/s among passing steps; for
// streams the highest passing level).
absl::Status RunSweep(const SweepOptions& options, const SloSpec& slo,
                      const std::function<absl::StatusOr<RunSummary>(double level)>& measure,
                      std::vector<SweepStep>& steps, std::optional<size_t>& best);

}  // namespace sluice::loadtest
