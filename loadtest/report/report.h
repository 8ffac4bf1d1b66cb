// Everything one invocation of sluice-loadtest measured, gathered for the table, the JSON report and the
// plot: the run's configuration, its summary, SLO verdicts, cost, the server's own figures, verification
// results, a per-second timeline and a latency histogram, and sweep steps.
// Thread-safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loadtest/core/api.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/slo.h"
#include "loadtest/core/summary.h"
#include "loadtest/core/sweep.h"
#include "loadtest/core/verify_report.h"
#include "loadtest/monitor/server_monitor.h"
#include "loadtest/report/pricing.h"

namespace sluice::loadtest {

struct ModelDescription {
  std::string name, kind, profile;
  double weight = 1;
  int64_t max_length = 0;
  int sample_rate = 0;
  bool sample_rate_assumed = false;
};

// One window of the timeline: requests that ended in [t_s, t_s + width).
struct TimelinePoint {
  double t_s = 0;  // since the measured window began
  int64_t ok = 0, errors = 0;
  double p50_ms = 0, p95_ms = 0, p99_ms = 0;
};

struct Histogram {
  std::vector<double> edges_ms;  // bins [edges[i], edges[i+1]); log-spaced
  std::vector<int64_t> counts;
};

struct Report {
  std::string target;  // the gRPC address
  Api api = Api::kKServe;
  std::vector<ModelDescription> models;
  RunOptions options;
  uint64_t seed = 0;
  RunSummary summary;
  std::optional<SloSpec> slo;
  std::vector<Verdict> verdicts;
  std::optional<Pricing> pricing;
  std::optional<CostFigures> cost;
  std::optional<ServerMetrics> server;
  std::vector<VerifyReport> verify;
  std::vector<TimelinePoint> timeline;
  Histogram histogram;
  Histogram ttft_histogram, itl_histogram;  // --api openai: every TTFT and every inter-token gap (ms)
  std::vector<SweepStep> sweep;
  std::optional<size_t> sweep_best;  // index of the passing step with the highest throughput
};

// Per-window counts and percentiles of the measured requests, by completion time.
std::vector<TimelinePoint> BuildTimeline(const RunResult& run, double width_s);
// Log-spaced histogram of successful measured latencies (`bins` bins from the fastest to the slowest).
Histogram BuildHistogram(const RunResult& run, int bins);

}  // namespace sluice::loadtest
