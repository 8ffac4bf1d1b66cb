// sluice-advisor's output, in the style of `sluice-loadtest --dry-run`: a terminal table (the advised
// `buckets:` line, how the observed requests fill each advised bucket, and the advised plan side by side with
// the current config, powers of two and pad-to-max), and JSON (schema "sluice-advisor/1").
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "loadtest/advisor/advisor.h"

namespace sluice::advisor {

std::string FormatAdvice(const Advice& advice);

// {"schema": "sluice-advisor/1", "requests", "lengths_source", "max_length", "distinct_lengths", "candidates", "candidates_merged",
//  "multiple_of", "batch_size", "batch_sizes", "max_buckets", "per_bucket_penalty_s", "sample_rate",
//  "cost_model": {"a", "b", "c", "source"}, "bucket_lengths": [...], "config_line",
//  "plans": [{"name", "lengths", "buckets", "graphs", "requests", "refused", "real_steps", "padded_steps",
//             "padding_efficiency", "seconds_per_request", "throughput_rps", "vs_advised_compute",
//             "per_bucket": [{"length", "requests", "real_steps"}]}],
//  "notes": [...]}
std::string AdviceToJson(const Advice& advice);
absl::Status WriteAdviceJson(const Advice& advice, const std::string& path);

}  // namespace sluice::advisor
