#include "loadtest/core/sweep.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace sluice::loadtest {

constexpr double kMinDeliveredShare = 0.9;

absl::StatusOr<std::vector<double>> SweepLevels(const SweepOptions& options) {
  if (options.knob != "concurrency" && options.knob != "rate" && options.knob != "streams") {
    return absl::InvalidArgumentError(
        absl::StrCat("sweep knob '", options.knob, "' (expected concurrency, rate or streams)"));
  }
  std::vector<double> levels = options.levels;
  if (levels.empty()) {
    if (!(options.start > 0) || !(options.factor > 1) || options.steps < 1) {
      return absl::InvalidArgumentError("a sweep needs start > 0, factor > 1 and steps >= 1");
    }
    double level = options.start;
    for (int i = 0; i < options.steps; ++i, level *= options.factor) {
      levels.push_back(options.knob == "rate" ? level : std::round(level));
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
    if (const std::optional<SpeechStats>& speech = step.summary.speech; speech && options.knob == "streams") {
      spdlog::info("sweep streams {:g}: RTFx {:.2f}, chunk latency p95 {:.1f} ms, error rate {:.4f}: {}", level,
                   speech->rtfx, speech->chunk_latency.p95_ms, step.summary.total.error_rate,
                   step.pass ? "PASS" : "FAIL");
    } else {
      spdlog::info("sweep {} {:g}: {:.2f} req/s, p99 {:.1f} ms, error rate {:.4f}: {}", options.knob, level,
                   step.summary.total.req_per_s, step.summary.total.latency.p99_ms, step.summary.total.error_rate,
                   step.pass ? "PASS" : "FAIL");
    }
    steps.push_back(std::move(step));
    // Streams: the most streams that met the SLO (each stream is real-time audio, so more is the capacity).
    const bool better = !best || (options.knob == "streams"
                                      ? steps.back().level > steps[*best].level
                                      : steps.back().summary.total.req_per_s > steps[*best].summary.total.req_per_s);
    if (steps.back().pass && better) best = steps.size() - 1;
    if (!steps.back().pass && options.stop_at_first_failure) break;
  }
  return absl::OkStatus();
}

}  // namespace sluice::loadtest
