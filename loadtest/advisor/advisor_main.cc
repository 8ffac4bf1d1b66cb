// sluice-advisor: which bucket lengths to compile for a model, from the lengths its traffic really has.
// Reads the observed request lengths (a file of lengths, a server's sluice_request_length histogram from /metrics,
// or a folder of recordings), a cost model (given, fitted to sluice-bench-backend timings, taken from a
// sim model's config, or a default for illustration), solves for the bucket lengths with the least expected
// compute per request under a graph budget, and prints them beside the current config, powers of two and
// pad-to-max. See README.md "Bucket advisor". Exit codes: 0 done, 2 bad arguments or files.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backend/base/model_config.h"
#include "loadtest/advisor/advisor.h"
#include "loadtest/advisor/advisor_report.h"
#include "loadtest/advisor/audio_lengths.h"
#include "loadtest/advisor/bench_timings.h"
#include "loadtest/advisor/cost_model.h"
#include "loadtest/advisor/metrics_lengths.h"
#include "loadtest/advisor/observed_lengths.h"
#include "loadtest/monitor/prometheus_text.h"

namespace sluice::advisor {
namespace {

constexpr int kExitUsage = 2;

struct Flags {
  std::string lengths_file;
  std::string column;
  std::string metrics_url;
  std::string metrics_file;
  std::string token;
  double metrics_timeout_s = 10;
  std::string audio_folder;
  int max_buckets = 4;
  int64_t multiple_of = 1;
  int64_t max_candidates = 2000;
  int batch_size = 0;  // 0: the model's largest, else 1
  std::string cost_model;
  std::string bench_file;
  std::string model;
  std::string model_config;
  std::string current;
  int64_t pow2_unit = 0;
  int64_t max_length = 0;
  double per_bucket_penalty_ms = 0;
  std::string json_path;
};

// Prints "FLAG: message" and returns the usage exit code.
int Usage(const std::string& flag, absl::string_view message) {
  std::cerr << "sluice-advisor: " << flag << ": " << message << "\n";
  return kExitUsage;
}

absl::StatusOr<std::vector<int64_t>> ParseLengthList(const std::string& text) {
  std::vector<int64_t> lengths;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      return absl::InvalidArgumentError(absl::StrCat("'", part, "' is not a positive integer length"));
    }
    lengths.push_back(v);
  }
  if (lengths.empty()) return absl::InvalidArgumentError("no lengths");
  return lengths;
}

// --model-config: the model's current buckets, batch sizes, sample rate and (sim models) its cost model.
absl::StatusOr<ModelConfig> LoadModel(const std::string& path) {
  std::filesystem::path dir(path);
  if (std::filesystem::is_regular_file(dir)) dir = dir.parent_path();
  return LoadModelConfig(dir.empty() ? std::string(".") : dir.string());
}

// Fills the cost model from --cost-model, --bench-json, the model's sim section, or the default. Returns the
// exit code on failure, 0 on success.
int ChooseCost(const Flags& f, const std::optional<ModelConfig>& model, AdvisorInput* in) {
  if (!f.cost_model.empty()) {
    absl::StatusOr<CostModel> cost = ParseCostModel(f.cost_model);
    if (!cost.ok()) return Usage("--cost-model", cost.status().message());
    in->cost = *cost;
    in->cost_source = "--cost-model";
  } else if (!f.bench_file.empty()) {
    const std::string name = !f.model.empty() ? f.model : model ? model->name : "";
    absl::StatusOr<std::vector<TimingPoint>> points = ReadBenchTimings(f.bench_file, name);
    if (!points.ok()) return Usage("--bench-json", points.status().message());
    absl::StatusOr<CostModel> cost = FitCostModel(*points);
    if (!cost.ok()) return Usage("--bench-json", absl::StrCat(f.bench_file, ": ", cost.status().message()));
    in->cost = *cost;
    in->cost_source = absl::StrCat("non-negative least squares over ", points->size(), " timings in ", f.bench_file);
  } else if (model && model->sim) {
    in->cost = CostModel{model->sim->base_ms / 1000, model->sim->per_sample_us * 1e-6, 0};
    in->cost_source = absl::StrCat("the sim cost model of ", model->config_path);
  } else {
    in->cost = kDefaultCostModel;
    in->cost_source = "default, for illustration only: give --cost-model or --bench-json";
  }
  return 0;
}

// The flag that gives the traffic, or "" when none does.
std::string TrafficFlag(const Flags& f) {
  if (!f.lengths_file.empty()) return "--lengths-file";
  if (!f.metrics_url.empty()) return "--metrics-url";
  if (!f.metrics_file.empty()) return "--metrics-file";
  if (!f.audio_folder.empty()) return "--audio-folder";
  return "";
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Fills the observed lengths (and where they came from) from the one traffic flag given. Returns the exit code on
// failure, 0 on success.
int ReadTraffic(const Flags& f, const std::optional<ModelConfig>& model, AdvisorInput* in) {
  if (!f.lengths_file.empty()) {
    absl::StatusOr<std::vector<int64_t>> lengths = ReadLengthsFile(f.lengths_file, f.column);
    if (!lengths.ok()) return Usage("--lengths-file", lengths.status().message());
    in->lengths_source = absl::StrCat(lengths->size(), " lengths in ", f.lengths_file);
    in->lengths = std::move(*lengths);
    return 0;
  }
  if (!f.audio_folder.empty()) {
    if (!in->sample_rate) {
      return Usage("--audio-folder", "needs --model-config of a speech model (its input's sample_rate says what "
                                     "rate the lengths are counted at)");
    }
    absl::StatusOr<AudioLengths> audio = LengthsFromAudioFolder(f.audio_folder, *in->sample_rate);
    if (!audio.ok()) return Usage("--audio-folder", audio.status().message());
    in->lengths_source = audio->Describe(f.audio_folder, *in->sample_rate);
    in->lengths_notes = audio->Notes(*in->sample_rate);
    in->lengths = std::move(audio->lengths);
    return 0;
  }
  const std::string flag = !f.metrics_url.empty() ? "--metrics-url" : "--metrics-file";
  const std::string source = !f.metrics_url.empty() ? f.metrics_url : f.metrics_file;
  absl::StatusOr<std::string> text = !f.metrics_url.empty()
                                         ? loadtest::HttpGet(f.metrics_url, f.metrics_timeout_s, f.token)
                                         : ReadText(f.metrics_file);
  if (!text.ok()) return Usage(flag, text.status().message());
  const std::string name = !f.model.empty() ? f.model : model ? model->name : "";
  absl::StatusOr<HistogramLengths> histogram = LengthsFromMetricsText(*text, name, source);
  if (!histogram.ok()) return Usage(flag, histogram.status().message());
  in->lengths_source = histogram->Describe(source);
  in->lengths_notes = histogram->Notes();
  in->counted = std::move(histogram->counts);
  return 0;
}

void AddFlags(CLI::App& app, Flags& f) {
  auto* file = app.add_option("--lengths-file", f.lengths_file,
                              "observed request lengths in the model's steps (samples or tokens): one per line, or "
                              "a CSV / JSON-lines column (see --column); '#' lines are skipped")
                   ->group("Traffic");
  app.add_option("--column", f.column,
                 "CSV column (header name or 0-based index) or JSON-lines key holding the length (default: "
                 "'length', or the first CSV column)")
      ->needs(file)->group("Traffic");
  auto* url = app.add_option("--metrics-url", f.metrics_url,
                             "a running sluice-server's /metrics (e.g. http://127.0.0.1:8000/metrics), read once: "
                             "the sluice_request_length histogram of --model; each histogram bucket's requests count "
                             "at its upper bound (safe: every request must fit; lengths overstated by up to ~5 %)")
                  ->excludes(file)->group("Traffic");
  auto* metrics_file = app.add_option("--metrics-file", f.metrics_file,
                                      "a saved /metrics page, read as --metrics-url")
                           ->excludes(file)->excludes(url)->group("Traffic");
  app.add_option("--token", f.token, "bearer token for --metrics-url")->needs(url)->group("Traffic");
  app.add_option("--metrics-timeout", f.metrics_timeout_s, "seconds to wait for --metrics-url")
      ->check(CLI::PositiveNumber)->capture_default_str()->needs(url)->group("Traffic");
  app.add_option("--audio-folder", f.audio_folder,
                 "recordings (any format libsndfile reads; not subfolders): each one's length in samples, "
                 "resampled (rounded up) to the sample_rate of --model-config's speech input")
      ->excludes(file)->excludes(url)->excludes(metrics_file)->group("Traffic");
  app.add_option("--max-length", f.max_length,
                 "count longer observed lengths as this (sluice-loadtest clips to the largest bucket the same way); "
                 "default: no clipping")
      ->check(CLI::PositiveNumber)->group("Traffic");
  app.add_option("--max-buckets", f.max_buckets, "graph budget: at most this many bucket lengths")
      ->check(CLI::Range(1, 256))->capture_default_str()->group("Plan");
  app.add_option("--multiple-of", f.multiple_of,
                 "bucket lengths are multiples of this (e.g. 160 samples = 10 ms at 16 kHz)")
      ->check(CLI::PositiveNumber)->capture_default_str()->group("Plan");
  app.add_option("--max-candidates", f.max_candidates,
                 "more distinct lengths than this are merged into quantile groups (said in the output)")
      ->check(CLI::Range(int64_t{1}, int64_t{20000}))->capture_default_str()->group("Plan");
  app.add_option("--per-bucket-penalty-ms", f.per_bucket_penalty_ms,
                 "optional: ms per request charged for each bucket used, to trade graphs against compute "
                 "(0: use the whole budget)")
      ->check(CLI::NonNegativeNumber)->capture_default_str()->group("Plan");
  app.add_option("--batch-size", f.batch_size, "B in the cost model (default: the model's largest, else 1)")
      ->check(CLI::PositiveNumber)->group("Cost");
  auto* cost = app.add_option("--cost-model", f.cost_model,
                              "a,b,c of time = a + b*B*L + c*B*L^2 seconds (default 0.002,1e-7,1e-13, or a sim "
                              "model's own)")
                   ->group("Cost");
  app.add_option("--bench-json,--bench", f.bench_file,
                 "timings to fit a, b, c >= 0 to by non-negative least squares: what sluice-bench-backend --json writes, any JSON "
                 "objects with batch_size, length, p50_ms, or the text sluice-bench-backend prints")
      ->excludes(cost)->group("Cost");
  app.add_option("--model", f.model,
                 "the model whose histogram to read from /metrics and whose timings to use in --bench-json "
                 "(default: --model-config's, else the only one there)")
      ->group("Traffic");
  app.add_option("--model-config", f.model_config,
                 "the model's config.yaml (or its directory): current buckets, batch sizes, sample rate")
      ->group("Compare");
  app.add_option("--current", f.current, "current bucket lengths, e.g. 16000,32000,64000 (instead of the config's)")
      ->group("Compare");
  app.add_option("--pow2-unit", f.pow2_unit, "the powers-of-two row uses unit*2^k (default: --multiple-of)")
      ->check(CLI::PositiveNumber)->group("Compare");
  app.add_option("--json", f.json_path, "write the advice as JSON (schema sluice-advisor/1) here")->group("Output");
}

int Run(const Flags& f) {
  AdvisorInput in;
  std::optional<ModelConfig> model;
  if (!f.model_config.empty()) {
    absl::StatusOr<ModelConfig> loaded = LoadModel(f.model_config);
    if (!loaded.ok()) return Usage("--model-config", loaded.status().message());
    model = std::move(*loaded);
    in.current = model->buckets.lengths;
    in.current_source = model->config_path;
    in.batch_sizes = model->buckets.batch_sizes;
    if (model->kind == ModelKind::kSpeech && !model->inputs.empty()) in.sample_rate = model->inputs.front().sample_rate;
  }
  if (!f.current.empty()) {
    absl::StatusOr<std::vector<int64_t>> current = ParseLengthList(f.current);
    if (!current.ok()) return Usage("--current", current.status().message());
    in.current = *current;
    in.current_source = "--current";
  }
  const std::string traffic_flag = TrafficFlag(f);
  if (traffic_flag.empty()) {
    std::cerr << "sluice-advisor: no traffic: give one of --lengths-file FILE, --metrics-url URL, --metrics-file "
                 "FILE or --audio-folder DIR (see --help)\n";
    return kExitUsage;
  }
  if (int rc = ReadTraffic(f, model, &in); rc != 0) return rc;
  if (int rc = ChooseCost(f, model, &in); rc != 0) return rc;
  in.batch_size = f.batch_size > 0 ? f.batch_size : model ? model->max_batch_size() : 1;
  in.max_buckets = f.max_buckets;
  in.multiple_of = f.multiple_of;
  in.max_candidates = f.max_candidates;
  in.per_bucket_penalty = f.per_bucket_penalty_ms / 1000;
  in.pow2_unit = f.pow2_unit;
  in.clip_to = f.max_length;
  in.model_name = !f.model.empty() ? f.model : model ? model->name : "";

  absl::StatusOr<Advice> advice = Advise(std::move(in));
  if (!advice.ok()) return Usage(traffic_flag, advice.status().message());
  std::cout << FormatAdvice(*advice);
  if (!f.json_path.empty()) {
    if (absl::Status s = WriteAdviceJson(*advice, f.json_path); !s.ok()) return Usage("--json", s.message());
  }
  return 0;
}

}  // namespace
}  // namespace sluice::advisor

int main(int argc, char** argv) {
  sluice::advisor::Flags flags;
  CLI::App app{"sluice-advisor: the bucket lengths that minimise expected compute per request for a model's observed "
               "request lengths and a graph budget (exact dynamic programme), beside the current config, powers of "
               "two and pad-to-max"};
  sluice::advisor::AddFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : sluice::advisor::kExitUsage;
  }
  return sluice::advisor::Run(flags);
}
