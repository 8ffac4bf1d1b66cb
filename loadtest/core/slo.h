// Service-level objectives from a YAML file, the PASS/FAIL verdicts of a run against them, and the
// per-request test that decides goodput. Every key is optional; unknown keys are errors naming file and line.
//
//   latency_ms: {p50: 100, p90: 200, p95: 300, p99: 500, max: 2000, mean: 150}  # successful requests
//   max_error_rate: 0.01                # failed / measured requests (client drops count as failed)
//   min_throughput_rps: 20              # successful requests per second
//   min_goodput_rps: 15                 # requests meeting `request` per second
//   min_audio_seconds_per_second: 50    # RTFx, speech models
//   request: {latency_ms: 500, max_rtf: 0.25}  # per request: latency, and latency / audio duration (speech)
//   chunk_latency_ms: {p95: 300}        # --api riva-streaming: chunk sent -> result covering it (same keys
//   final_latency_ms: {p99: 800}        #   as latency_ms); WritesDone -> final result
//   max_wer: 0.2                        # the Riva APIs, with reference transcripts: corpus word error rate
//   ttft_ms: {p99: 2000}                # --api openai: time to first token, inter-token gaps, time per output
//   itl_ms: {p99: 150}                  #   token (same keys as latency_ms; latency_ms is the end-to-end time)
//   tpot_ms: {p99: 100}
//   min_output_tokens_per_s: 500        # --api openai: output tokens per second
//   request: {ttft_ms: 2000, tpot_ms: 100}  # --api openai, per request (goodput, MLPerf server-scenario style)
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/summary.h"

namespace sluice::loadtest {

struct SloSpec {
  std::map<std::string, double> latency_ms;  // "p50", "p90", "p95", "p99", "max", "mean"
  std::optional<double> max_error_rate;
  std::optional<double> min_throughput_rps;
  std::optional<double> min_goodput_rps;
  std::optional<double> min_audio_seconds_per_second;
  std::optional<double> request_latency_ms;
  std::optional<double> request_max_rtf;
  std::map<std::string, double> chunk_latency_ms;  // keys as latency_ms
  std::map<std::string, double> final_latency_ms;
  std::optional<double> max_wer;
  std::map<std::string, double> ttft_ms, itl_ms, tpot_ms;  // generation; keys as latency_ms
  std::optional<double> min_output_tokens_per_s;
  std::optional<double> request_ttft_ms, request_tpot_ms;

  bool empty() const;
};

absl::StatusOr<SloSpec> LoadSlo(const std::string& path);
// `label` names the text in messages (as a file would be).
absl::StatusOr<SloSpec> ParseSlo(const std::string& yaml_text, const std::string& label);

// True when a successful request met every per-request objective. A request without audio (non-speech)
// passes max_rtf.
bool MeetsRequestSlo(const SloSpec& slo, const RequestRecord& record, double audio_seconds);
// A generation request's per-request objectives (request latency_ms is its e2e; TPOT only with >= 2 tokens).
bool MeetsGenerationSlo(const SloSpec& slo, double ttft_ms, std::optional<double> tpot_ms, double e2e_ms);

struct Verdict {
  std::string name;  // "p99 latency (ms)"
  std::string op;    // "<=" or ">="
  double threshold = 0;
  double actual = 0;
  bool pass = false;
  bool no_samples = false;  // the figure had nothing to measure (e.g. no successful request): shown n/a, not passing
};

std::vector<Verdict> Evaluate(const SloSpec& slo, const RunSummary& summary);
bool AllPass(const std::vector<Verdict>& verdicts);
// "PASS  p99 latency (ms)  123.4 <= 500"
std::string FormatVerdict(const Verdict& v);

}  // namespace sluice::loadtest
