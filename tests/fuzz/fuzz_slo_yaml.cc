// Fuzzes sluice-loadtest's SLO YAML (loadtest/core/slo.h) through its string entry point ParseSlo, then evaluates an
// accepted SLO against an empty and a populated run summary and formats every verdict, as the report does.
// Asserts beyond "no crash, no ASan/UBSan report": every objective of an accepted SLO is a non-negative number
// (never NaN), max_error_rate is a fraction in [0, 1], latency keys are the documented ones, empty() agrees with
// the fields, and Evaluate gives one named verdict per objective it checks.
#include <cstdint>
#include <set>
#include <string>

#include "loadtest/core/slo.h"
#include "tests/fuzz/fuzz_util.h"

namespace sluice::loadtest {
namespace {

void CheckNonNegative(const std::optional<double>& value, const char* what) {
  if (value) FUZZ_CHECK(*value >= 0, what);  // false for NaN too
}

void CheckSlo(const SloSpec& slo) {
  static const std::set<std::string> kLatencyKeys = {"p50", "p90", "p95", "p99", "max", "mean"};
  for (const auto& [key, value] : slo.latency_ms) {
    FUZZ_CHECK(kLatencyKeys.count(key) == 1 && value >= 0, key);
  }
  CheckNonNegative(slo.max_error_rate, "max_error_rate");
  if (slo.max_error_rate) FUZZ_CHECK(*slo.max_error_rate <= 1, "max_error_rate is a fraction");
  CheckNonNegative(slo.min_throughput_rps, "min_throughput_rps");
  CheckNonNegative(slo.min_goodput_rps, "min_goodput_rps");
  CheckNonNegative(slo.min_audio_seconds_per_second, "min_audio_seconds_per_second");
  CheckNonNegative(slo.request_latency_ms, "request.latency_ms");
  CheckNonNegative(slo.request_max_rtf, "request.max_rtf");
  const bool any = !slo.latency_ms.empty() || slo.max_error_rate || slo.min_throughput_rps || slo.min_goodput_rps ||
                   slo.min_audio_seconds_per_second || slo.request_latency_ms || slo.request_max_rtf;
  FUZZ_CHECK(slo.empty() == !any, "empty()");

  RunSummary summary;  // a plausible measured run
  summary.window_s = 10;
  summary.total.requests = 100;
  summary.total.ok = 97;
  summary.total.errors = 3;
  summary.total.good = 90;
  summary.total.error_rate = 0.03;
  summary.total.req_per_s = 9.7;
  summary.total.goodput_rps = 9.0;
  summary.total.audio_s_per_s = 42;
  summary.total.latency = {97, 120, 10, 100, 180, 200, 300, 400};
  for (const RunSummary& s : {RunSummary{}, summary}) {
    for (const Verdict& verdict : Evaluate(slo, s)) {
      FUZZ_CHECK(!verdict.name.empty(), "a verdict names its objective");
      (void)FormatVerdict(verdict);
    }
  }
}

}  // namespace
}  // namespace sluice::loadtest

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // SLO files are small; yaml-cpp is slow on huge inputs
  absl::StatusOr<sluice::loadtest::SloSpec> slo =
      sluice::loadtest::ParseSlo(std::string(reinterpret_cast<const char*>(data), size), "fuzz/slo.yaml");
  if (slo.ok()) sluice::loadtest::CheckSlo(*slo);
  return 0;
}
