#include "loadtest/core/slo.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/base/status_macros.h"
#include "backend/base/yaml_node.h"

namespace sluice::loadtest {
namespace {

absl::Status ReadNonNegative(const YamlNode& parent, std::string_view key, std::optional<double>& out) {
  std::optional<YamlNode> node = parent.Optional(key);
  if (!node) return absl::OkStatus();
  SLUICE_ASSIGN_OR_RETURN(double value, node->AsDouble());
  if (!(value >= 0)) return node->Error("must be a non-negative number");
  out = value;
  return absl::OkStatus();
}

// A latency map such as latency_ms: {p50, p90, p95, p99, max, mean}.
absl::Status ReadLatencyMap(const YamlNode& root, std::string_view key, std::map<std::string, double>& out) {
  std::optional<YamlNode> latency = root.Optional(key);
  if (!latency) return absl::OkStatus();
  SLUICE_RETURN_IF_ERROR(latency->ExpectMap());
  SLUICE_RETURN_IF_ERROR(latency->CheckKeys({"p50", "p90", "p95", "p99", "max", "mean"}));
  for (const char* name : {"p50", "p90", "p95", "p99", "max", "mean"}) {
    std::optional<double> value;
    SLUICE_RETURN_IF_ERROR(ReadNonNegative(*latency, name, value));
    if (value) out[name] = *value;
  }
  return absl::OkStatus();
}

absl::StatusOr<SloSpec> Parse(const YamlNode& root) {
  SloSpec slo;
  if (!root.IsMap()) return root.Error("an SLO file is a map (latency_ms, max_error_rate, ...)");
  SLUICE_RETURN_IF_ERROR(root.CheckKeys({"latency_ms", "max_error_rate", "min_throughput_rps", "min_goodput_rps",
                                         "min_audio_seconds_per_second", "request", "chunk_latency_ms",
                                         "final_latency_ms", "max_wer", "ttft_ms", "itl_ms", "tpot_ms",
                                         "min_output_tokens_per_s"}));
  SLUICE_RETURN_IF_ERROR(ReadLatencyMap(root, "ttft_ms", slo.ttft_ms));
  SLUICE_RETURN_IF_ERROR(ReadLatencyMap(root, "itl_ms", slo.itl_ms));
  SLUICE_RETURN_IF_ERROR(ReadLatencyMap(root, "tpot_ms", slo.tpot_ms));
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "min_output_tokens_per_s", slo.min_output_tokens_per_s));
  SLUICE_RETURN_IF_ERROR(ReadLatencyMap(root, "latency_ms", slo.latency_ms));
  SLUICE_RETURN_IF_ERROR(ReadLatencyMap(root, "chunk_latency_ms", slo.chunk_latency_ms));
  SLUICE_RETURN_IF_ERROR(ReadLatencyMap(root, "final_latency_ms", slo.final_latency_ms));
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "max_wer", slo.max_wer));
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "max_error_rate", slo.max_error_rate));
  if (slo.max_error_rate && *slo.max_error_rate > 1) {
    return root.Required("max_error_rate")->Error("is a fraction in [0, 1]");
  }
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "min_throughput_rps", slo.min_throughput_rps));
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "min_goodput_rps", slo.min_goodput_rps));
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "min_audio_seconds_per_second", slo.min_audio_seconds_per_second));
  if (std::optional<YamlNode> request = root.Optional("request")) {
    SLUICE_RETURN_IF_ERROR(request->ExpectMap());
    SLUICE_RETURN_IF_ERROR(request->CheckKeys({"latency_ms", "max_rtf", "ttft_ms", "tpot_ms"}));
    SLUICE_RETURN_IF_ERROR(ReadNonNegative(*request, "ttft_ms", slo.request_ttft_ms));
    SLUICE_RETURN_IF_ERROR(ReadNonNegative(*request, "tpot_ms", slo.request_tpot_ms));
    SLUICE_RETURN_IF_ERROR(ReadNonNegative(*request, "latency_ms", slo.request_latency_ms));
    SLUICE_RETURN_IF_ERROR(ReadNonNegative(*request, "max_rtf", slo.request_max_rtf));
  }
  return slo;
}

}  // namespace

bool SloSpec::empty() const {
  return latency_ms.empty() && !max_error_rate && !min_throughput_rps && !min_goodput_rps &&
         !min_audio_seconds_per_second && !request_latency_ms && !request_max_rtf && chunk_latency_ms.empty() &&
         final_latency_ms.empty() && !max_wer && ttft_ms.empty() && itl_ms.empty() && tpot_ms.empty() &&
         !min_output_tokens_per_s && !request_ttft_ms && !request_tpot_ms;
}

absl::StatusOr<SloSpec> LoadSlo(const std::string& path) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  return Parse(root);
}

absl::StatusOr<SloSpec> ParseSlo(const std::string& yaml_text, const std::string& label) {
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadString(yaml_text, label));
  return Parse(root);
}

bool MeetsRequestSlo(const SloSpec& slo, const RequestRecord& record, double audio_seconds) {
  if (!record.ok()) return false;
  const double latency_s = record.latency_s();
  if (slo.request_latency_ms && latency_s * 1e3 > *slo.request_latency_ms) return false;
  if (slo.request_max_rtf && audio_seconds > 0 && latency_s / audio_seconds > *slo.request_max_rtf) return false;
  return true;
}

bool MeetsGenerationSlo(const SloSpec& slo, double ttft_ms, std::optional<double> tpot_ms, double e2e_ms) {
  if (slo.request_latency_ms && e2e_ms > *slo.request_latency_ms) return false;
  if (slo.request_ttft_ms && ttft_ms > *slo.request_ttft_ms) return false;
  if (slo.request_tpot_ms && tpot_ms && *tpot_ms > *slo.request_tpot_ms) return false;
  return true;
}

std::vector<Verdict> Evaluate(const SloSpec& slo, const RunSummary& summary) {
  std::vector<Verdict> verdicts;
  auto at_most = [&](std::string name, double threshold, double actual) {
    verdicts.push_back({std::move(name), "<=", threshold, actual, actual <= threshold});
  };
  auto at_least = [&](std::string name, double threshold, double actual) {
    verdicts.push_back({std::move(name), ">=", threshold, actual, actual >= threshold});
  };
  const ThroughputStats& t = summary.total;
  // No measured latency at all (no successful request, or no speech figures) cannot pass a latency objective.
  auto latencies = [&](const std::string& what, const std::map<std::string, double>& thresholds,
                       const LatencyStats& l) {
    const std::map<std::string, double> actual = {{"p50", l.p50_ms}, {"p90", l.p90_ms}, {"p95", l.p95_ms},
                                                  {"p99", l.p99_ms}, {"max", l.max_ms},  {"mean", l.mean_ms}};
    for (const auto& [key, threshold] : thresholds) {
      verdicts.push_back({absl::StrCat(key, " ", what, " (ms)"), "<=", threshold, actual.at(key),
                          l.count > 0 && actual.at(key) <= threshold, l.count == 0});
    }
  };
  latencies("latency", slo.latency_ms, t.latency);
  const SpeechStats speech = summary.speech.value_or(SpeechStats());
  latencies("chunk latency", slo.chunk_latency_ms, speech.chunk_latency);
  latencies("final latency", slo.final_latency_ms, speech.final_latency);
  const GenerationStats generation = summary.generation.value_or(GenerationStats());
  latencies("TTFT", slo.ttft_ms, generation.ttft);
  latencies("ITL", slo.itl_ms, generation.itl);
  latencies("TPOT", slo.tpot_ms, generation.tpot);
  if (slo.min_output_tokens_per_s) {
    at_least("output tokens/s", *slo.min_output_tokens_per_s, generation.output_tokens_per_s);
  }
  if (slo.max_wer) {
    // Without references there is no WER: that cannot pass either.
    const double wer = speech.wer ? speech.wer->wer : 0;
    verdicts.push_back({"WER", "<=", *slo.max_wer, wer, speech.wer && wer <= *slo.max_wer, !speech.wer});
  }
  if (slo.max_error_rate) at_most("error rate", *slo.max_error_rate, t.error_rate);
  if (slo.min_throughput_rps) at_least("throughput (req/s)", *slo.min_throughput_rps, t.req_per_s);
  if (slo.min_goodput_rps) at_least("goodput (req/s)", *slo.min_goodput_rps, t.goodput_rps);
  if (slo.min_audio_seconds_per_second) {
    at_least("audio-s/s (RTFx)", *slo.min_audio_seconds_per_second, t.audio_s_per_s);
  }
  if (t.requests == 0) verdicts.push_back({"measured requests", ">=", 1, 0, false, false});
  return verdicts;
}

bool AllPass(const std::vector<Verdict>& verdicts) {
  for (const Verdict& v : verdicts) {
    if (!v.pass) return false;
  }
  return true;
}

std::string FormatVerdict(const Verdict& v) {
  if (v.no_samples) {
    return absl::StrFormat("n/a   %-22s %12s %s %g (no samples: cannot pass)", v.name, "n/a", v.op, v.threshold);
  }
  return absl::StrFormat("%s  %-22s %12.4g %s %g", v.pass ? "PASS" : "FAIL", v.name, v.actual, v.op, v.threshold);
}

}  // namespace sluice::loadtest
