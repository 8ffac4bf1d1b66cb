#include "loadtest/report/report.h"

#include <algorithm>
#include <cmath>

namespace sluice::loadtest {

std::vector<TimelinePoint> BuildTimeline(const RunResult& run, double width_s) {
  std::vector<TimelinePoint> points;
  if (width_s <= 0) return points;
  const int windows = static_cast<int>(std::ceil(run.window_s() / width_s));
  if (windows <= 0 || windows > 100000) return points;
  std::vector<std::vector<double>> latencies(windows);
  points.resize(windows);
  for (int i = 0; i < windows; ++i) points[i].t_s = i * width_s;
  for (const RequestRecord& r : run.records) {
    if (!r.measured) continue;
    const int w = std::clamp(static_cast<int>((r.done_s - run.measure_start_s) / width_s), 0, windows - 1);
    if (r.ok()) {
      ++points[w].ok;
      latencies[w].push_back(r.latency_s() * 1e3);
    } else {
      ++points[w].errors;
    }
  }
  for (int i = 0; i < windows; ++i) {
    std::sort(latencies[i].begin(), latencies[i].end());
    points[i].p50_ms = Percentile(latencies[i], 50);
    points[i].p95_ms = Percentile(latencies[i], 95);
    points[i].p99_ms = Percentile(latencies[i], 99);
  }
  return points;
}

Histogram BuildHistogram(const RunResult& run, int bins) {
  Histogram h;
  std::vector<double> latencies;
  for (const RequestRecord& r : run.records) {
    if (r.measured && r.ok()) latencies.push_back(std::max(r.latency_s() * 1e3, 1e-3));
  }
  if (latencies.empty() || bins <= 0) return h;
  const auto [lo_it, hi_it] = std::minmax_element(latencies.begin(), latencies.end());
  const double lo = std::log(*lo_it), hi = std::log(*hi_it * 1.0001 + 1e-9);
  const double step = std::max(hi - lo, 1e-6) / bins;
  for (int i = 0; i <= bins; ++i) h.edges_ms.push_back(std::exp(lo + i * step));
  h.counts.assign(bins, 0);
  for (double l : latencies) ++h.counts[std::clamp(static_cast<int>((std::log(l) - lo) / step), 0, bins - 1)];
  return h;
}

}  // namespace sluice::loadtest
