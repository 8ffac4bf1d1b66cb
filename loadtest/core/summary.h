// The numbers of one run, computed from its request records: counts, errors by gRPC code, throughput
// (requests, audio seconds and tokens per second of the measured window), latency percentiles of the
// successful measured requests, goodput, and the same per model.
// Definitions: the window runs from the first measured request's scheduled send to the last measured
// request's end. error rate = failed measured requests (any non-OK code, client drops included) / measured
// requests. goodput = measured requests that succeeded and met every per-request SLO / window seconds.
// RTFx = audio seconds of successful requests / window seconds. Percentiles are nearest-rank.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loadtest/core/api.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/word_errors.h"
#include "loadtest/core/workload.h"

namespace sluice::loadtest {

struct LatencyStats {
  int64_t count = 0;
  double mean_ms = 0, min_ms = 0, p50_ms = 0, p90_ms = 0, p95_ms = 0, p99_ms = 0, max_ms = 0;
};

// Nearest-rank percentile of sorted values (p in [0, 100]); 0 for an empty list.
double Percentile(const std::vector<double>& sorted, double p);
LatencyStats ComputeLatencyStats(std::vector<double> latencies_ms);

struct ThroughputStats {
  std::string model;  // empty for the whole run
  int64_t requests = 0, ok = 0, errors = 0, good = 0;
  std::map<std::string, int64_t> errors_by_code;
  std::map<std::string, std::string> first_error_by_code;  // the whole run only: each code's first message
  double error_rate = 0;
  double req_per_s = 0, goodput_rps = 0;
  double audio_seconds = 0, audio_s_per_s = 0;  // speech models only
  int64_t tokens = 0;                           // text models only
  double tokens_per_s = 0;
  LatencyStats latency;
};

// The speech API's figures (--api riva-offline | riva-streaming); speech/speech_summary.h computes them.
struct WerStats {
  int64_t scored = 0;  // transcripts compared (successful measured requests whose recording has a reference)
  WordErrors errors;
  double wer = 0;  // errors / reference words
};

struct SpeechStats {
  Api api = Api::kRivaOffline;  // riva-offline | riva-streaming | openai-audio
  int streams = 0;  // riva-streaming: concurrent streams
  double chunk_ms = 0;
  bool realtime = false;
  double audio_seconds = 0;
  double rtfx = 0;
  LatencyStats chunk_latency, final_latency, first_result;  // riva-streaming
  int64_t chunks = 0, chunks_unanswered = 0;                // riva-streaming
  std::optional<WerStats> wer;                              // when some scored request has a reference
};

// The generation API's figures (--api openai); generation_summary.h computes them. Over the successful measured
// requests: TTFT = scheduled send -> first content chunk; ITL = every gap between consecutive content chunks;
// TPOT = (e2e - TTFT) / (completion tokens - 1) per request; e2e = scheduled send -> stream end. Token counts are
// the server's `usage` (checked against the stream by the client). Goodput = requests meeting the SLO's
// per-request ttft_ms / tpot_ms / latency_ms (all successes when none is set) per window second.
struct GenerationStats {
  Api api = Api::kOpenAi;  // openai | triton-stream
  std::string prompt_source;  // how prompts were made (real text token ids, synthetic ids, a prompt file)
  std::string token_counts = "usage";  // where the token counts come from (openai: usage; triton-stream: the client)
  int64_t requests = 0;       // successful measured requests with an outcome
  int64_t prompt_tokens = 0, output_tokens = 0;
  double prompt_tokens_per_s = 0, output_tokens_per_s = 0;
  double mean_prompt_tokens = 0, mean_output_tokens = 0;
  LatencyStats ttft, itl, tpot, e2e;
  int64_t good = 0;
  double goodput_rps = 0;
  int64_t usage_mismatches = 0;  // measured requests failed as USAGE_MISMATCH
  int64_t merged_chunks = 0;     // requests streamed in fewer content chunks than usage's completion tokens
  std::vector<double> output_tokens_timeline;  // output tokens per second, 1 s bins from the window's start
};

struct RunSummary {
  std::string mode;  // "closed" or "open"
  int concurrency = 0;
  double rate = 0;
  std::string arrival;
  double burstiness = 1;
  double window_s = 0;
  double wall_s = 0;
  double max_send_lag_ms = 0;
  std::string stop_reason;
  bool capped = false;
  ThroughputStats total;
  std::vector<ThroughputStats> per_model;  // one per workload model, in mix order
  std::optional<SpeechStats> speech;       // the Riva APIs only
  std::optional<GenerationStats> generation;  // --api openai | triton-stream only
};

// `good` decides whether a successful request met every per-request SLO (null: every success is good).
RunSummary Summarize(const RunResult& run, const Workload& workload, const std::string& arrival, double burstiness,
                     const std::function<bool(const RequestRecord&, double audio_seconds)>& good);

}  // namespace sluice::loadtest
