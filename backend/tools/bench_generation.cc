#include "backend/tools/bench_generation.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>

#include "spdlog/spdlog.h"

namespace sluice {
namespace {

// Runs `call` once untimed, then `iterations` times; false (logged) if any call fails.
bool Time(int iterations, const std::function<absl::Status()>& call, GraphTiming* timing) {
  std::vector<double> ms;
  for (int i = 0; i <= iterations; ++i) {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = call();
    const double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!status.ok()) {
      spdlog::error("{}", status.ToString());
      return false;
    }
    if (i > 0) ms.push_back(elapsed);
  }
  std::sort(ms.begin(), ms.end());
  timing->mean_ms = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  timing->p50_ms = ms[ms.size() / 2];
  timing->min_ms = ms.front();
  return true;
}

}  // namespace

int BenchGenerationModel(const LoadedModel& model, int iterations, GenerationTimings* timings) {
  const GenerationOptions& g = *model.config->generation;
  GenerationBackend& instance = *model.generation_instances.front();
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> token(0, g.vocab_size - 1);
  std::printf("\n%s on %s: %d timed runs per graph after one untimed run\n", model.config->name.c_str(),
              instance.Describe().c_str(), iterations);
  std::printf("%-8s %6s %8s %10s %10s %10s %12s\n", "graph", "batch", "length", "mean_ms", "p50_ms", "min_ms",
              "tokens/s");
  for (int64_t length : g.prefill_lengths) {
    PrefillInput input{length, 0, std::vector<int32_t>(length)};
    for (int32_t& t : input.tokens) t = token(rng);
    GraphTiming timing{1, length};
    if (!Time(iterations, [&] { return instance.Prefill(input).status(); }, &timing)) return 1;
    timing.tokens_per_s = static_cast<double>(length) / (timing.p50_ms / 1000.0);
    std::printf("%-8s %6d %8lld %10.3f %10.3f %10.3f %12.1f\n", "prefill", 1, static_cast<long long>(length),
                timing.mean_ms, timing.p50_ms, timing.min_ms, timing.tokens_per_s);
    timings->prefill.push_back(timing);
  }
  for (int batch_size : g.decode_batch_sizes) {
    for (int64_t kv_length : g.kv_lengths) {
      DecodeInput input{batch_size, kv_length, {}};
      const int rows = std::min(batch_size, g.kv_cache.slots);
      for (int r = 0; r < rows; ++r) input.rows.push_back({token(rng), kv_length - 1, r});
      GraphTiming timing{batch_size, kv_length};
      if (!Time(iterations, [&] { return instance.Decode(input).status(); }, &timing)) return 1;
      timing.tokens_per_s = static_cast<double>(rows) / (timing.p50_ms / 1000.0);
      std::printf("%-8s %6d %8lld %10.3f %10.3f %10.3f %12.1f\n", "decode", batch_size,
                  static_cast<long long>(kv_length), timing.mean_ms, timing.p50_ms, timing.min_ms,
                  timing.tokens_per_s);
      timings->decode.push_back(timing);
    }
  }
  return 0;
}

void WriteGenerationJson(rapidjson::PrettyWriter<rapidjson::StringBuffer>& w, const GenerationTimings& timings) {
  auto write_common = [&](const GraphTiming& t) {
    w.Key("mean_ms");
    w.Double(t.mean_ms);
    w.Key("p50_ms");
    w.Double(t.p50_ms);
    w.Key("min_ms");
    w.Double(t.min_ms);
    w.Key("tokens_per_s");
    w.Double(t.tokens_per_s);
  };
  w.Key("prefill");
  w.StartArray();
  for (const GraphTiming& t : timings.prefill) {
    w.StartObject();
    w.Key("prompt_length");
    w.Int64(t.length);
    write_common(t);
    w.EndObject();
  }
  w.EndArray();
  w.Key("decode");
  w.StartArray();
  for (const GraphTiming& t : timings.decode) {
    w.StartObject();
    w.Key("batch_size");
    w.Int(t.batch_size);
    w.Key("kv_length");
    w.Int64(t.length);
    write_common(t);
    w.EndObject();
  }
  w.EndArray();
}

}  // namespace sluice
