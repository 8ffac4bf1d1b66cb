#include "loadtest/sweep.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace sluice::loadtest {

constexpr double kMinDeliveredShare = 0.9;

absl::StatusOr<std::vector<double>> SweepLevels(const SweepOptions& options) {
  if (options.knob != "concurrency" && options.knob != "rate") {
    return absl::InvalidArgumentError(absl::StrCat("sweep knob '", options.knob, "' (expected concurrency or rate)"));
  }
  std::vector<double> levels = options.levels;
  if (levels.empty()) {
    if (!(options.start > 0) || !(options.factor > 1) || options.steps < 1) {
      return absl::InvalidArgumentError("a sweep needs start > 0, factor > 1 and steps >= 1");
    }
    double level = options.start;
    for (int i = 0; i < options.steps; ++i, level *= options.factor) {
      levels.push_back(options.knob == "concurrency" ? std::round(level) : level);
    }
  }
  for (size_t i = 0; i < levels.size(); ++i) {
    if (!(levels[i] > 0) || (i > 0 && levels[i] <= levels[i - 1])) {
      return absl::InvalidArgumentError("sweep levels must be positive and rising");
    }
  }
  return levels;
}

std::vector<Verdict> SweepVerdicts(const SloSpec& slo, const std::string& knob, double level,
                                   const RunSummary& summary) {
  std::vector<Verdict> verdicts = Evaluate(slo, summary);
  if (knob == "rate") {
    const double delivered = summary.total.req_per_s / level;
    verdicts.push_back(
        {"delivered / offered rate", ">=", kMinDeliveredShare, delivered, delivered >= kMinDeliveredShare});
  }
  return verdicts;
}

absl::Status RunSweep(const SweepOptions& options, const SloSpec& slo,
                      const std::function<absl::StatusOr<RunSummary>(double level)>& measure,
                      std::vector<SweepStep>& steps, std::optional<size_t>& best) {
  absl::StatusOr<std::vector<double>> levels = SweepLevels(options);
  if (!levels.ok()) return levels.status();
  for (double level : *levels) {
    absl::StatusOr<RunSummary> summary = measure(level);
    if (!summary.ok()) return summary.status();
    SweepStep step;
    step.knob = options.knob;
    step.level = level;
    step.summary = *std::move(summary);
    step.verdicts = SweepVerdicts(slo, options.knob, level, step.summary);
    step.pass = AllPass(step.verdicts);
    spdlog::info("sweep {} {:g}: {:.2f} req/s, p99 {:.1f} ms, error rate {:.4f}: {}", options.knob, level,
                 step.summary.total.req_per_s, step.summary.total.latency.p99_ms, step.summary.total.error_rate,
                 step.pass ? "PASS" : "FAIL");
    steps.push_back(std::move(step));
    if (steps.back().pass && (!best || steps.back().summary.total.req_per_s > steps[*best].summary.total.req_per_s)) {
      best = steps.size() - 1;
    }
    if (!steps.back().pass && options.stop_at_first_failure) break;
  }
  return absl::OkStatus();
}

}  // namespace sluice::loadtest
