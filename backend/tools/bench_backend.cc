// sluice-bench-backend: loads and warms a model repository, prints every bucket's load and warm time, then
// (unless --load-only) runs each bucket graph at full length in a loop and prints its steady-state compute
// time and throughput: the raw backend limit that serving numbers are compared against. --json FILE also writes
// those timings as JSON (schema sluice-bench-backend/1), which `sluice-advisor --bench-json` fits its cost model to.
// Generation models (kind: generation) are timed per graph instead: each prompt bucket's prefill and each
// (batch bucket, KV bucket) decode step (bench_generation.h).
// Memory is reported, not guessed: per model its weights, caches and graph files as loaded (InstanceMemory), and
// the process's resident memory before loading, after loading + warming and at its peak (VmRSS / VmHWM).
#include <rapidjson/prettywriter.h>
#include <rapidjson/stringbuffer.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_split.h"
#include "backend/model_repository.h"
#include "backend/base/server_config.h"
#include "backend/tools/bench_generation.h"
#include "spdlog/spdlog.h"

namespace sluice {
namespace {

// A "VmRSS:"-style line of /proc/self/status in bytes; 0 when it cannot be read.
int64_t ProcStatusBytes(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::atoll(line.c_str() + key.size() + 1) * 1024;  // in kB
  }
  return 0;
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

struct Flags {
  std::string config;
  std::string repository;
  std::string models;
  int iterations = 5;
  bool load_only = false;
  std::string json_path;
};

struct BucketTiming {
  int batch_size = 0;
  int64_t length = 0;
  double p50_ms = 0;
  double min_ms = 0;
  double rows_per_s = 0;
  double steps_per_s = 0;
};

struct ModelTimings {
  std::string model;
  std::string device;
  std::optional<int> sample_rate;  // speech models
  double load_seconds = 0;
  std::vector<BucketTiming> buckets;
  std::optional<GenerationTimings> generation;  // generation models: prefill/decode timings instead of buckets
};

PaddedBatch RandomFullBatch(const ModelConfig& model, int batch_size, int64_t length, std::mt19937& rng) {
  PaddedBatch batch{batch_size, length, {}, std::vector<int64_t>(batch_size, length)};
  for (const TensorSpec& spec : model.inputs) {
    std::vector<int64_t> shape = {batch_size, length};
    shape.insert(shape.end(), spec.shape.begin() + 1, spec.shape.end());
    HostTensor t = HostTensor::Zeros(spec.dtype, shape);
    if (spec.dtype == DataType::kFp32) {
      std::uniform_real_distribution<float> noise(-0.5f, 0.5f);
      for (float& v : t.values<float>()) v = noise(rng);
    } else if (spec.dtype == DataType::kInt64) {
      std::uniform_int_distribution<int64_t> token(1, 100);
      for (int64_t& v : t.values<int64_t>()) v = token(rng);
    }
    batch.inputs.push_back(std::move(t));
  }
  return batch;
}

void PrintLoadTable(const ModelRepository& repository) {
  std::printf("\n%-12s %-8s %6s %8s %8s %8s\n", "model", "instance", "batch", "length", "load_s", "warm_s");
  for (const LoadedModel& model : repository.models()) {
    for (size_t i = 0; i < model.instances.size(); ++i) {
      for (const BucketLoadStats& s : model.instances[i]->load_stats()) {
        std::printf("%-12s %-8zu %6d %8lld %8.3f %8.3f\n", model.config->name.c_str(), i, s.batch_size,
                    static_cast<long long>(s.length), s.load_seconds, s.warm_seconds);
      }
    }
    // Generation models: prefill graphs have batch 1 and the prompt bucket; decode graphs the KV bucket.
    for (size_t i = 0; i < model.generation_instances.size(); ++i) {
      for (const BucketLoadStats& s : model.generation_instances[i]->load_stats()) {
        std::printf("%-12s %-8zu %6d %8lld %8.3f %8.3f\n", model.config->name.c_str(), i, s.batch_size,
                    static_cast<long long>(s.length), s.load_seconds, s.warm_seconds);
      }
    }
    const size_t instances = model.instances.size() + model.generation_instances.size();
    std::printf("%-12s total load+warm %.2f s over %zu instance(s)\n", model.config->name.c_str(), model.load_seconds,
                instances);
    const ModelMemory memory = MemoryOf(model);
    std::printf("%-12s memory: %s\n", model.config->name.c_str(), DescribeModelMemory(memory, instances).c_str());
    if (std::string warning = GraphFormatWarning(model.config->name, memory); !warning.empty()) {
      spdlog::warn("{}", warning);
    }
  }
}

int BenchModel(const LoadedModel& model, int iterations, ModelTimings* timings) {
  const ModelConfig& config = *model.config;
  if (config.generation) {
    timings->model = config.name;
    timings->device = model.generation_instances.front()->Describe();
    timings->load_seconds = model.load_seconds;
    return BenchGenerationModel(model, iterations, &timings->generation.emplace());
  }
  Backend& instance = *model.instances.front();
  std::mt19937 rng(1234);
  const bool speech = config.kind == ModelKind::kSpeech && config.inputs.front().sample_rate;
  timings->model = config.name;
  timings->device = instance.Describe();
  timings->load_seconds = model.load_seconds;
  if (speech) timings->sample_rate = *config.inputs.front().sample_rate;
  std::printf("\n%s on %s: %d timed runs per bucket, every row at full bucket length\n", config.name.c_str(),
              instance.Describe().c_str(), iterations);
  std::printf("%6s %8s %12s %12s %12s %14s\n", "batch", "length", "p50_ms", "min_ms", "rows/s",
              speech ? "audio_s/s" : "steps/s");
  for (int64_t length : config.buckets.lengths) {
    for (int batch_size : config.buckets.batch_sizes) {
      PaddedBatch batch = RandomFullBatch(config, batch_size, length, rng);
      std::vector<double> ms;
      for (int i = 0; i < iterations; ++i) {
        const auto start = std::chrono::steady_clock::now();
        absl::StatusOr<BatchResult> result = instance.Execute(batch);
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
        if (!result.ok()) {
          spdlog::error("{}", result.status().ToString());
          return 1;
        }
      }
      std::sort(ms.begin(), ms.end());
      const double p50 = ms[ms.size() / 2];
      const double rows_per_s = batch_size / (p50 / 1000.0);
      const double steps_per_s = rows_per_s * static_cast<double>(length);
      std::printf("%6d %8lld %12.2f %12.2f %12.2f %14.1f\n", batch_size, static_cast<long long>(length), p50, ms[0],
                  rows_per_s, speech ? steps_per_s / *config.inputs.front().sample_rate : steps_per_s);
      timings->buckets.push_back({batch_size, length, p50, ms[0], rows_per_s, steps_per_s});
    }
  }
  return 0;
}

// {"schema": "sluice-bench-backend/1", "iterations": N, "models": [{"model", "device", "sample_rate" (speech
//  models), "load_seconds", "buckets": [{"batch_size", "length", "p50_ms", "min_ms", "rows_per_s",
//  "steps_per_s"}]}]}: the shape sluice-advisor's --bench-json reads (loadtest/advisor/bench_timings.h).
// A generation model's entry has "kind": "generation" and "prefill"/"decode" arrays instead of "buckets"
// (bench_generation.h); they hold no "length" key, so the advisor never mistakes them for bucket timings.
bool WriteJson(const std::string& path, int iterations, const std::vector<ModelTimings>& models) {
  rapidjson::StringBuffer buffer;
  rapidjson::PrettyWriter<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  w.Key("schema");
  w.String("sluice-bench-backend/1");
  w.Key("iterations");
  w.Int(iterations);
  w.Key("models");
  w.StartArray();
  for (const ModelTimings& m : models) {
    w.StartObject();
    w.Key("model");
    w.String(m.model.c_str());
    w.Key("device");
    w.String(m.device.c_str());
    if (m.sample_rate) {
      w.Key("sample_rate");
      w.Int(*m.sample_rate);
    }
    w.Key("load_seconds");
    w.Double(m.load_seconds);
    if (m.generation) {
      w.Key("kind");
      w.String("generation");
      WriteGenerationJson(w, *m.generation);
      w.EndObject();
      continue;
    }
    w.Key("buckets");
    w.StartArray();
    for (const BucketTiming& b : m.buckets) {
      w.StartObject();
      w.Key("batch_size");
      w.Int(b.batch_size);
      w.Key("length");
      w.Int64(b.length);
      w.Key("p50_ms");
      w.Double(b.p50_ms);
      w.Key("min_ms");
      w.Double(b.min_ms);
      w.Key("rows_per_s");
      w.Double(b.rows_per_s);
      w.Key("steps_per_s");
      w.Double(b.steps_per_s);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  std::ofstream out(path);
  out << buffer.GetString() << "\n";
  if (!out) {
    spdlog::error("--json: cannot write '{}'", path);
    return false;
  }
  return true;
}

int Main(int argc, char** argv) {
  CLI::App app{"sluice-bench-backend: load, warm and time every bucket graph of a model repository"};
  Flags flags;
  app.add_option("--config", flags.config, "server config (its model_repository is used)");
  app.add_option("--repository", flags.repository, "model repository directory (instead of --config)");
  app.add_option("--models", flags.models, "comma-separated model names (default: all)");
  app.add_option("--iterations", flags.iterations, "timed runs per bucket")->check(CLI::PositiveNumber);
  auto* load_only = app.add_flag("--load-only", flags.load_only, "only load, warm and print the per-bucket load table");
  app.add_option("--json", flags.json_path,
                 "also write the timings here as JSON (schema sluice-bench-backend/1), for sluice-advisor --bench-json")
      ->excludes(load_only);
  CLI11_PARSE(app, argc, argv);

  RepositoryOptions options;
  if (!flags.config.empty()) {
    absl::StatusOr<ServerConfig> config = LoadServerConfig(flags.config);
    if (!config.ok()) {
      spdlog::error("{}", std::string(config.status().message()));
      return 2;
    }
    options.path = config->model_repository;
  } else if (!flags.repository.empty()) {
    options.path = flags.repository;
  } else {
    std::fprintf(stderr, "one of --config or --repository is required (see --help)\n");
    return 2;
  }
  if (!flags.models.empty()) options.only_models = absl::StrSplit(flags.models, ',');

  spdlog::info("loading model repository {}", options.path);
  const int64_t rss_before = ProcStatusBytes("VmRSS");
  absl::StatusOr<std::unique_ptr<ModelRepository>> repository = ModelRepository::Load(options);
  if (!repository.ok()) {
    spdlog::error("{}", std::string(repository.status().message()));
    return 2;
  }
  PrintLoadTable(**repository);
  std::printf("process RSS: %.1f MiB before loading, %.1f MiB after loading + warming, peak %.1f MiB\n",
              MiB(rss_before), MiB(ProcStatusBytes("VmRSS")), MiB(ProcStatusBytes("VmHWM")));
  if (flags.load_only) return 0;
  std::vector<ModelTimings> timings;
  for (const LoadedModel& model : (*repository)->models()) {
    if (int rc = BenchModel(model, flags.iterations, &timings.emplace_back()); rc != 0) return rc;
  }
  std::printf("\nprocess peak RSS (VmHWM) after the timed runs: %.1f MiB\n", MiB(ProcStatusBytes("VmHWM")));
  if (!flags.json_path.empty() && !WriteJson(flags.json_path, flags.iterations, timings)) return 2;
  return 0;
}

}  // namespace
}  // namespace sluice

int main(int argc, char** argv) { return sluice::Main(argc, argv); }
