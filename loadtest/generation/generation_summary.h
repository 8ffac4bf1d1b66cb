// The generation figures of one run (GenerationStats, summary.h) from the runner's records and each successful
// request's streamed outcome: TTFT, every inter-token (inter-chunk) gap, TPOT, e2e, token counts (openai: from
// `usage`; triton-stream: the client's own, generation_call.h), tokens per second, goodput under the SLO's
// per-request objectives, and the output-tokens timeline. Open-loop times count from the scheduled send (the
// client's own lag included), as every latency of the runner does.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/slo.h"
#include "loadtest/core/summary.h"
#include "loadtest/generation/generation_call.h"
#include "loadtest/report/report.h"

namespace sluice::loadtest {

// `outcomes`: by request index, the outcomes of requests that ended OK.
GenerationStats SummarizeGeneration(const RunResult& run,
                                    const absl::flat_hash_map<uint64_t, GenerationOutcome>& outcomes,
                                    const SloSpec& slo);

// Every TTFT and every inter-chunk gap of the successful measured requests, in ms (for the plot's histograms).
struct GenerationSamples {
  std::vector<double> ttft_ms, itl_ms;
};
GenerationSamples GenerationLatencySamples(const RunResult& run,
                                           const absl::flat_hash_map<uint64_t, GenerationOutcome>& outcomes);

// A log-spaced histogram of positive values (`bins` bins from the smallest to the largest).
Histogram LogHistogram(std::vector<double> values_ms, int bins);

}  // namespace sluice::loadtest
