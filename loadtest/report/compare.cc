#include "loadtest/report/compare.h"

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/pointer.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sluice::loadtest {
namespace {

enum class Better { kHigher, kLower, kNone };

struct Row {
  const char* label;
  const char* pointer;
  Better better;
  const char* format;  // printf format of one value
  bool hide_if_both_zero = false;  // figures that only apply to some models (audio, tokens)
};

constexpr Row kRows[] = {
    {"requests (measured)", "/results/requests", Better::kNone, "%.0f"},
    {"ok", "/results/ok", Better::kNone, "%.0f"},
    {"errors", "/results/errors", Better::kLower, "%.0f"},
    {"error rate", "/results/error_rate", Better::kLower, "%.4f"},
    {"throughput (req/s)", "/results/req_per_s", Better::kHigher, "%.2f"},
    {"goodput (req/s)", "/results/goodput_rps", Better::kHigher, "%.2f"},
    {"audio-s/s (RTFx)", "/results/audio_s_per_s", Better::kHigher, "%.2f", true},
    {"tokens/s", "/results/tokens_per_s", Better::kHigher, "%.1f", true},
    {"output tokens/s", "/results/generation/output_tokens_per_s", Better::kHigher, "%.1f"},
    {"prompt tokens/s", "/results/generation/prompt_tokens_per_s", Better::kHigher, "%.1f"},
    {"TTFT p50 (ms)", "/results/generation/ttft_ms/p50", Better::kLower, "%.2f"},
    {"TTFT p99 (ms)", "/results/generation/ttft_ms/p99", Better::kLower, "%.2f"},
    {"ITL p50 (ms)", "/results/generation/itl_ms/p50", Better::kLower, "%.2f"},
    {"ITL p99 (ms)", "/results/generation/itl_ms/p99", Better::kLower, "%.2f"},
    {"TPOT p50 (ms)", "/results/generation/tpot_ms/p50", Better::kLower, "%.2f"},
    {"TPOT p99 (ms)", "/results/generation/tpot_ms/p99", Better::kLower, "%.2f"},
    {"usage mismatches", "/results/generation/usage_mismatches", Better::kLower, "%.0f"},
    {"latency mean (ms)", "/results/latency_ms/mean", Better::kLower, "%.2f"},
    {"latency p50 (ms)", "/results/latency_ms/p50", Better::kLower, "%.2f"},
    {"latency p90 (ms)", "/results/latency_ms/p90", Better::kLower, "%.2f"},
    {"latency p95 (ms)", "/results/latency_ms/p95", Better::kLower, "%.2f"},
    {"latency p99 (ms)", "/results/latency_ms/p99", Better::kLower, "%.2f"},
    {"latency max (ms)", "/results/latency_ms/max", Better::kLower, "%.2f"},
    {"$/h (instance)", "/cost/hourly_usd", Better::kNone, "%.4f"},
    {"$ per 1k successful", "/cost/usd_per_1k_success", Better::kLower, "%.5f"},
    {"audio-seconds per $", "/cost/audio_seconds_per_dollar", Better::kHigher, "%.0f", true},
    {"tokens per $", "/cost/tokens_per_dollar", Better::kHigher, "%.0f", true},
    {"prompt tokens per $", "/cost/prompt_tokens_per_dollar", Better::kHigher, "%.0f", true},
    {"output tokens per $", "/cost/output_tokens_per_dollar", Better::kHigher, "%.0f", true},
    {"server gen queue (ms)", "/server/generation/queue_ms_mean", Better::kLower, "%.2f"},
    {"server decode batch", "/server/generation/decode_batch_mean", Better::kNone, "%.2f"},
    {"server KV slots peak", "/server/generation/kv_slots_in_use_peak", Better::kNone, "%.0f"},
    {"server queue (ms)", "/server/queue_ms_mean", Better::kLower, "%.2f"},
    {"server compute (ms)", "/server/compute_ms_mean", Better::kLower, "%.2f"},
    {"server batch size", "/server/batch_size_mean", Better::kNone, "%.2f"},
    {"server peak RSS (MiB)", "/server/peak_rss_bytes", Better::kLower, "%.1f"},
    {"server load time (s)", "/server/load_seconds", Better::kLower, "%.2f"},
    {"server warm time (s)", "/server/warm_seconds", Better::kLower, "%.2f"},
    {"sweep best (req/s)", "/sweep/best_req_per_s", Better::kHigher, "%.2f"},
};

absl::StatusOr<rapidjson::Document> Parse(const std::string& json, const std::string& label) {
  rapidjson::Document doc;
  doc.Parse(json.c_str(), json.size());
  if (doc.HasParseError()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": not JSON (",
                                                   rapidjson::GetParseError_En(doc.GetParseError()),
                                                   " at offset ", doc.GetErrorOffset(), ")"));
  }
  if (!doc.IsObject() || !doc.HasMember("schema") || !doc["schema"].IsString() ||
      std::string(doc["schema"].GetString()).rfind("sluice-loadtest/", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": not a sluice-loadtest report"));
  }
  return doc;
}

std::optional<double> Number(const rapidjson::Document& doc, const char* pointer) {
  const rapidjson::Value* v = rapidjson::Pointer(pointer).Get(doc);
  if (v == nullptr || !v->IsNumber()) return std::nullopt;
  double value = v->GetDouble();
  if (std::string(pointer) == "/server/peak_rss_bytes") value /= 1024.0 * 1024.0;
  return value;
}

// The server's model_stats summed: queue/compute means weighted by inferences (for reports without /metrics).
std::optional<double> ModelStatsMean(const rapidjson::Document& doc, const char* field) {
  const rapidjson::Value* stats = rapidjson::Pointer("/server/model_stats").Get(doc);
  if (stats == nullptr || !stats->IsArray() || stats->Empty()) return std::nullopt;
  double weighted = 0, total = 0;
  for (const auto& s : stats->GetArray()) {
    const double n = s["inferences"].GetDouble();
    weighted += n * s[field].GetDouble();
    total += n;
  }
  return total > 0 ? std::optional<double>(weighted / total) : std::nullopt;
}

std::string Describe(const rapidjson::Document& doc) {
  const rapidjson::Value* mode_value = rapidjson::Pointer("/run/mode").Get(doc);
  const std::string mode = mode_value != nullptr && mode_value->IsString() ? mode_value->GetString() : "";
  std::string level = mode == "closed" ? absl::StrCat("concurrency ", doc["run"]["concurrency"].GetInt64())
                                       : absl::StrFormat("rate %.4g", doc["run"]["rate"].GetDouble());
  std::string target = doc["config"]["target"].GetString();
  return absl::StrCat(target, ", ", mode, " loop, ", level);
}

std::string Cell(const std::optional<double>& v, const char* format) {
  if (!v) return "-";
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, *v);
  return buffer;
}

}  // namespace

absl::StatusOr<std::string> CompareReports(const std::string& json_a, const std::string& json_b,
                                           const std::string& label_a, const std::string& label_b) {
  absl::StatusOr<rapidjson::Document> a = Parse(json_a, label_a);
  if (!a.ok()) return a.status();
  absl::StatusOr<rapidjson::Document> b = Parse(json_b, label_b);
  if (!b.ok()) return b.status();

  std::string out = absl::StrFormat("A: %s (%s)\nB: %s (%s)\n\n", label_a, Describe(*a), label_b, Describe(*b));
  absl::StrAppend(&out, absl::StrFormat("%-24s %14s %14s %9s  %s\n", "", "A", "B", "B/A", "better"));
  auto line = [&](const std::string& label, std::optional<double> va, std::optional<double> vb, Better better,
                  const char* format, bool hide_if_both_zero = false) {
    if (!va && !vb) return;
    if (hide_if_both_zero && va.value_or(0) == 0 && vb.value_or(0) == 0) return;
    std::string ratio = "-", winner;
    if (va && vb) {
      if (*va != 0) ratio = absl::StrFormat("%.3f", *vb / *va);
      if (better != Better::kNone && *va != *vb) {
        winner = ((*vb > *va) == (better == Better::kHigher)) ? "B" : "A";
      } else if (better != Better::kNone) {
        winner = "=";
      }
    }
    absl::StrAppend(&out, absl::StrFormat("%-24s %14s %14s %9s  %s\n", label, Cell(va, format), Cell(vb, format),
                                          ratio, winner));
  };
  for (const Row& row : kRows) {
    std::optional<double> va = Number(*a, row.pointer), vb = Number(*b, row.pointer);
    // Without /metrics, fall back on gRPC ModelStatistics for the server's queue and compute time.
    if (std::string(row.pointer) == "/server/queue_ms_mean") {
      if (!va) va = ModelStatsMean(*a, "queue_ms_mean");
      if (!vb) vb = ModelStatsMean(*b, "queue_ms_mean");
    } else if (std::string(row.pointer) == "/server/compute_ms_mean") {
      if (!va) va = ModelStatsMean(*a, "compute_ms_mean");
      if (!vb) vb = ModelStatsMean(*b, "compute_ms_mean");
    }
    line(row.label, va, vb, row.better, row.format, row.hide_if_both_zero);
  }
  // Correctness: the worst max abs error and the mismatched cases over every verified model.
  auto verify = [](const rapidjson::Document& doc, const char* field, bool take_max) -> std::optional<double> {
    if (!doc.HasMember("verify") || !doc["verify"].IsArray() || doc["verify"].Empty()) return std::nullopt;
    double v = 0;
    for (const auto& m : doc["verify"].GetArray()) {
      const double x = m[field].IsNumber() ? m[field].GetDouble() : INFINITY;
      v = take_max ? std::max(v, x) : v + x;
    }
    return v;
  };
  line("verify max abs error", verify(*a, "max_abs_error", true), verify(*b, "max_abs_error", true), Better::kLower,
       "%.3g");
  line("verify mismatched cases", verify(*a, "mismatched_cases", false), verify(*b, "mismatched_cases", false),
       Better::kLower, "%.0f");
  auto slo = [](const rapidjson::Document& doc) -> std::string {
    const rapidjson::Value* pass = rapidjson::Pointer("/slo/pass").Get(doc);
    return pass == nullptr ? "-" : pass->GetBool() ? "PASS" : "FAIL";
  };
  if (slo(*a) != "-" || slo(*b) != "-") {
    absl::StrAppend(&out, absl::StrFormat("%-24s %14s %14s\n", "SLO", slo(*a), slo(*b)));
  }
  return out;
}

absl::StatusOr<std::string> CompareReportFiles(const std::string& path_a, const std::string& path_b) {
  auto read = [](const std::string& path) -> absl::StatusOr<std::string> {
    std::ifstream in(path);
    if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  absl::StatusOr<std::string> a = read(path_a);
  if (!a.ok()) return a.status();
  absl::StatusOr<std::string> b = read(path_b);
  if (!b.ok()) return b.status();
  return CompareReports(*a, *b, path_a, path_b);
}

}  // namespace sluice::loadtest
