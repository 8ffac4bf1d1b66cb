#include "loadtest/core/summary.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace sluice::loadtest {

double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p / 100.0 * static_cast<double>(sorted.size()));
  const size_t index = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(sorted.size()))) - 1;
  return sorted[index];
}

LatencyStats ComputeLatencyStats(std::vector<double> latencies_ms) {
  LatencyStats s;
  s.count = static_cast<int64_t>(latencies_ms.size());
  if (latencies_ms.empty()) return s;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  s.mean_ms = std::accumulate(latencies_ms.begin(), latencies_ms.end(), 0.0) / latencies_ms.size();
  s.min_ms = latencies_ms.front();
  s.p50_ms = Percentile(latencies_ms, 50);
  s.p90_ms = Percentile(latencies_ms, 90);
  s.p95_ms = Percentile(latencies_ms, 95);
  s.p99_ms = Percentile(latencies_ms, 99);
  s.max_ms = latencies_ms.back();
  return s;
}

namespace {

struct Accumulator {
  ThroughputStats stats;
  std::vector<double> latencies_ms;

  void Add(const RequestRecord& r, const ModelInfo& info, bool good) {
    ++stats.requests;
    if (!r.ok()) {
      ++stats.errors;
      ++stats.errors_by_code[GrpcCodeName(r.code)];
      return;
    }
    ++stats.ok;
    if (good) ++stats.good;
    latencies_ms.push_back(r.latency_s() * 1e3);
    stats.audio_seconds += info.AudioSeconds(r.length);
    if (info.kind == "text") stats.tokens += r.length;
  }

  ThroughputStats Finish(double window_s) {
    stats.error_rate = stats.requests > 0 ? static_cast<double>(stats.errors) / stats.requests : 0;
    stats.req_per_s = stats.ok / window_s;
    stats.goodput_rps = stats.good / window_s;
    stats.audio_s_per_s = stats.audio_seconds / window_s;
    stats.tokens_per_s = stats.tokens / window_s;
    stats.latency = ComputeLatencyStats(std::move(latencies_ms));
    return stats;
  }
};

}  // namespace

RunSummary Summarize(const RunResult& run, const Workload& workload, const std::string& arrival, double burstiness,
                     const std::function<bool(const RequestRecord&, double audio_seconds)>& good) {
  RunSummary summary;
  summary.mode = run.concurrency > 0 ? "closed" : "open";
  summary.concurrency = run.concurrency;
  summary.rate = run.rate;
  summary.arrival = run.concurrency > 0 ? "" : arrival;
  summary.burstiness = burstiness;
  summary.window_s = run.window_s();
  summary.wall_s = run.wall_s;
  summary.max_send_lag_ms = run.max_send_lag_ms;
  summary.stop_reason = run.stop_reason;
  summary.capped = run.capped;

  const auto& models = workload.models();
  Accumulator total;
  std::vector<Accumulator> per_model(models.size());
  for (size_t m = 0; m < models.size(); ++m) per_model[m].stats.model = models[m].info.name;
  for (const RequestRecord& r : run.records) {
    if (!r.measured) continue;
    const ModelInfo& info = models[r.model].info;
    const bool is_good = r.ok() && (!good || good(r, info.AudioSeconds(r.length)));
    total.Add(r, info, is_good);
    per_model[r.model].Add(r, info, is_good);
  }
  summary.total = total.Finish(summary.window_s);
  for (const auto& [code, message] : run.first_errors) {  // warm-up errors too: the message is what matters
    summary.total.first_error_by_code.emplace(GrpcCodeName(code), message);
  }
  for (Accumulator& a : per_model) summary.per_model.push_back(a.Finish(summary.window_s));
  return summary;
}

}  // namespace sluice::loadtest
