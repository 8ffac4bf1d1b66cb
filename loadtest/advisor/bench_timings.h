// Measured (batch, length, seconds) timings for fitting the advisor's cost model, read from a file:
//  - JSON: every object anywhere in the document that has a batch size ("batch_size" or "batch"), a length
//    ("length") and a time ("p50_ms", "median_ms", "time_ms" or "ms" in milliseconds; "seconds" or "time_s")
//    is one timing; the nearest enclosing "model" (or "name") string says whose, e.g.
//      {"models": [{"model": "asr_ctc", "buckets": [{"batch_size": 1, "length": 16000, "p50_ms": 9.8}, ...]}]}
//    or a bare array of such objects.
//  - otherwise, the text that `sluice-bench-backend` prints: under each "<model> on <device>: ..." line, rows of
//    "batch length p50_ms min_ms rows/s steps/s"; p50_ms is used.
// `model` (empty = any) keeps one model's timings; when the file holds several models and none is named, that
// is an error listing them.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/advisor/cost_model.h"

namespace sluice::advisor {

absl::StatusOr<std::vector<TimingPoint>> ParseBenchTimings(absl::string_view text, const std::string& model,
                                                           const std::string& source_name);
absl::StatusOr<std::vector<TimingPoint>> ReadBenchTimings(const std::string& path, const std::string& model);

}  // namespace sluice::advisor
