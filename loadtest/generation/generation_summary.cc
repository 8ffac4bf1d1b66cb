#include "loadtest/generation/generation_summary.h"

#include <algorithm>
#include <cmath>

namespace sluice::loadtest {
namespace {

// Calls `fn(record, outcome)` for each successful measured request that has an outcome.
template <typename Fn>
void ForEachOutcome(const RunResult& run, const absl::flat_hash_map<uint64_t, GenerationOutcome>& outcomes,
                    Fn fn) {
  for (const RequestRecord& r : run.records) {
    if (!r.measured || !r.ok()) continue;
    auto it = outcomes.find(r.index);
    if (it != outcomes.end()) fn(r, it->second);
  }
}

}  // namespace

GenerationStats SummarizeGeneration(const RunResult& run,
                                    const absl::flat_hash_map<uint64_t, GenerationOutcome>& outcomes,
                                    const SloSpec& slo) {
  GenerationStats g;  // api and token_counts: the caller's (openai and usage by default)
  const double window_s = run.window_s();
  std::vector<double> ttft, itl, tpot, e2e;
  const size_t bins = static_cast<size_t>(std::ceil(window_s)) + 1;
  g.output_tokens_timeline.assign(bins, 0.0);
  for (const RequestRecord& r : run.records) {
    if (r.measured && r.code == kUsageMismatchCode) ++g.usage_mismatches;
  }
  ForEachOutcome(run, outcomes, [&](const RequestRecord& r, const GenerationOutcome& o) {
    ++g.requests;
    const int64_t out_tokens = o.completion_tokens.value_or(0);
    g.prompt_tokens += o.prompt_tokens.value_or(0);
    g.output_tokens += out_tokens;
    if (o.chunks() < out_tokens) ++g.merged_chunks;
    const double lag_s = r.sent_s - r.scheduled_s;  // open loop: the client's own delay counts
    const double e2e_ms = r.latency_s() * 1e3;
    e2e.push_back(e2e_ms);
    const double ttft_ms = o.chunk_times_s.empty() ? e2e_ms : (lag_s + o.chunk_times_s.front()) * 1e3;
    ttft.push_back(ttft_ms);
    for (size_t i = 1; i < o.chunk_times_s.size(); ++i) {
      itl.push_back((o.chunk_times_s[i] - o.chunk_times_s[i - 1]) * 1e3);
    }
    std::optional<double> tpot_ms;
    if (out_tokens > 1) {
      tpot_ms = std::max(0.0, e2e_ms - ttft_ms) / static_cast<double>(out_tokens - 1);
      tpot.push_back(*tpot_ms);
    }
    if (MeetsGenerationSlo(slo, ttft_ms, tpot_ms, e2e_ms)) ++g.good;
    // Output tokens over time: each chunk carries its share of the request's tokens.
    const double per_chunk = o.chunks() > 0 ? static_cast<double>(out_tokens) / o.chunks() : 0;
    for (double t : o.chunk_times_s) {
      const double since_start = r.sent_s + t - run.measure_start_s;
      if (since_start < 0) continue;
      const size_t bin = std::min(bins - 1, static_cast<size_t>(since_start));
      g.output_tokens_timeline[bin] += per_chunk;
    }
  });
  g.prompt_tokens_per_s = g.prompt_tokens / window_s;
  g.output_tokens_per_s = g.output_tokens / window_s;
  g.mean_prompt_tokens = g.requests > 0 ? static_cast<double>(g.prompt_tokens) / g.requests : 0;
  g.mean_output_tokens = g.requests > 0 ? static_cast<double>(g.output_tokens) / g.requests : 0;
  g.goodput_rps = g.good / window_s;
  g.ttft = ComputeLatencyStats(std::move(ttft));
  g.itl = ComputeLatencyStats(std::move(itl));
  g.tpot = ComputeLatencyStats(std::move(tpot));
  g.e2e = ComputeLatencyStats(std::move(e2e));
  return g;
}

GenerationSamples GenerationLatencySamples(const RunResult& run,
                                           const absl::flat_hash_map<uint64_t, GenerationOutcome>& outcomes) {
  GenerationSamples s;
  ForEachOutcome(run, outcomes, [&](const RequestRecord& r, const GenerationOutcome& o) {
    if (o.chunk_times_s.empty()) return;
    s.ttft_ms.push_back((r.sent_s - r.scheduled_s + o.chunk_times_s.front()) * 1e3);
    for (size_t i = 1; i < o.chunk_times_s.size(); ++i) {
      s.itl_ms.push_back((o.chunk_times_s[i] - o.chunk_times_s[i - 1]) * 1e3);
    }
  });
  return s;
}

Histogram LogHistogram(std::vector<double> values_ms, int bins) {
  Histogram h;
  std::erase_if(values_ms, [](double v) { return !(v > 0); });
  if (values_ms.empty() || bins < 1) return h;
  const auto [lo_it, hi_it] = std::minmax_element(values_ms.begin(), values_ms.end());
  const double lo = std::log(*lo_it), hi = std::log(*hi_it * 1.0001 + 1e-9);
  for (int i = 0; i <= bins; ++i) h.edges_ms.push_back(std::exp(lo + (hi - lo) * i / bins));
  h.counts.assign(bins, 0);
  for (double v : values_ms) {
    const int bin = hi > lo ? static_cast<int>((std::log(v) - lo) / (hi - lo) * bins) : 0;
    ++h.counts[std::clamp(bin, 0, bins - 1)];
  }
  return h;
}

}  // namespace sluice::loadtest
