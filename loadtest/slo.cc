#include "loadtest/slo.h"

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

absl::StatusOr<SloSpec> Parse(const YamlNode& root) {
  SloSpec slo;
  if (!root.IsMap()) return root.Error("an SLO file is a map (latency_ms, max_error_rate, ...)");
  SLUICE_RETURN_IF_ERROR(root.CheckKeys({"latency_ms", "max_error_rate", "min_throughput_rps", "min_goodput_rps",
                                         "min_audio_seconds_per_second", "request"}));
  if (std::optional<YamlNode> latency = root.Optional("latency_ms")) {
    SLUICE_RETURN_IF_ERROR(latency->ExpectMap());
    SLUICE_RETURN_IF_ERROR(latency->CheckKeys({"p50", "p90", "p95", "p99", "max", "mean"}));
    for (const char* key : {"p50", "p90", "p95", "p99", "max", "mean"}) {
      std::optional<double> value;
      SLUICE_RETURN_IF_ERROR(ReadNonNegative(*latency, key, value));
      if (value) slo.latency_ms[key] = *value;
    }
  }
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "max_error_rate", slo.max_error_rate));
  if (slo.max_error_rate && *slo.max_error_rate > 1) {
    return root.Required("max_error_rate")->Error("is a fraction in [0, 1]");
  }
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "min_throughput_rps", slo.min_throughput_rps));
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "min_goodput_rps", slo.min_goodput_rps));
  SLUICE_RETURN_IF_ERROR(ReadNonNegative(root, "min_audio_seconds_per_second", slo.min_audio_seconds_per_second));
  if (std::optional<YamlNode> request = root.Optional("request")) {
    SLUICE_RETURN_IF_ERROR(request->ExpectMap());
    SLUICE_RETURN_IF_ERROR(request->CheckKeys({"latency_ms", "max_rtf"}));
    SLUICE_RETURN_IF_ERROR(ReadNonNegative(*request, "latency_ms", slo.request_latency_ms));
    SLUICE_RETURN_IF_ERROR(ReadNonNegative(*request, "max_rtf", slo.request_max_rtf));
  }
  return slo;
}

}  // namespace

bool SloSpec::empty() const {
  return latency_ms.empty() && !max_error_rate && !min_throughput_rps && !min_goodput_rps &&
         !min_audio_seconds_per_second && !request_latency_ms && !request_max_rtf;
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

std::vector<Verdict> Evaluate(const SloSpec& slo, const RunSummary& summary) {
  std::vector<Verdict> verdicts;
  auto at_most = [&](std::string name, double threshold, double actual) {
    verdicts.push_back({std::move(name), "<=", threshold, actual, actual <= threshold});
  };
  auto at_least = [&](std::string name, double threshold, double actual) {
    verdicts.push_back({std::move(name), ">=", threshold, actual, actual >= threshold});
  };
  const ThroughputStats& t = summary.total;
  const LatencyStats& l = t.latency;
  const std::map<std::string, double> actual_latency = {{"p50", l.p50_ms}, {"p90", l.p90_ms}, {"p95", l.p95_ms},
                                                        {"p99", l.p99_ms}, {"max", l.max_ms},  {"mean", l.mean_ms}};
  for (const auto& [key, threshold] : slo.latency_ms) {
    // No successful request means no latency at all: that cannot pass a latency objective.
    verdicts.push_back({absl::StrCat(key, " latency (ms)"), "<=", threshold, actual_latency.at(key),
                        l.count > 0 && actual_latency.at(key) <= threshold});
  }
  if (slo.max_error_rate) at_most("error rate", *slo.max_error_rate, t.error_rate);
  if (slo.min_throughput_rps) at_least("throughput (req/s)", *slo.min_throughput_rps, t.req_per_s);
  if (slo.min_goodput_rps) at_least("goodput (req/s)", *slo.min_goodput_rps, t.goodput_rps);
  if (slo.min_audio_seconds_per_second) {
    at_least("audio-s/s (RTFx)", *slo.min_audio_seconds_per_second, t.audio_s_per_s);
  }
  if (t.requests == 0) verdicts.push_back({"measured requests", ">=", 1, 0, false});
  return verdicts;
}

bool AllPass(const std::vector<Verdict>& verdicts) {
  for (const Verdict& v : verdicts) {
    if (!v.pass) return false;
  }
  return true;
}

std::string FormatVerdict(const Verdict& v) {
  return absl::StrFormat("%s  %-22s %12.4g %s %g", v.pass ? "PASS" : "FAIL", v.name, v.actual, v.op, v.threshold);
}

}  // namespace sluice::loadtest
