// sluice-bench-backend's generation mode: times a generation model's graphs on its first instance, every prompt
// bucket's prefill (a full-length random prompt, batch 1) and every (batch bucket, KV bucket) decode step (as many
// real rows as the batch holds, up to the cache's slots, each at the KV bucket's last position: static shapes cost
// the same at any position), after one untimed run each. Writes rows that sluice-advisor's text and JSON readers
// skip (they hold no "length"), so bucket timings of other models in the same output stay unambiguous.
// Thread-safety: single-threaded tool code.
#pragma once

#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/model_repository.h"

namespace sluice {

struct GraphTiming {
  int batch_size = 0;     // 1 for prefill
  int64_t length = 0;     // prefill: prompt bucket; decode: KV bucket
  double mean_ms = 0;
  double p50_ms = 0;
  double min_ms = 0;
  double tokens_per_s = 0;  // prefill: prompt tokens / p50; decode: real rows / p50
};

struct GenerationTimings {
  std::vector<GraphTiming> prefill;
  std::vector<GraphTiming> decode;
};

// Prints the two tables to stdout and fills `timings`. Returns 0, or 1 after logging a failed call.
// REQUIRES: model.generation_instances is not empty.
int BenchGenerationModel(const LoadedModel& model, int iterations, GenerationTimings* timings);

// The "prefill" and "decode" members of a model's JSON object:
//   "prefill": [{"prompt_length", "mean_ms", "p50_ms", "min_ms", "tokens_per_s"}],
//   "decode": [{"batch_size", "kv_length", "mean_ms", "p50_ms", "min_ms", "tokens_per_s"}]
void WriteGenerationJson(rapidjson::PrettyWriter<rapidjson::StringBuffer>& w, const GenerationTimings& timings);

}  // namespace sluice
