#include "loadtest/app.h"

#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "loadtest/core/api_driver.h"
#include "loadtest/core/padding_plan.h"
#include "loadtest/generation/generation_driver.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/kserve/kserve_driver.h"
#include "loadtest/monitor/server_monitor.h"
#include "loadtest/report/plot_svg.h"
#include "loadtest/report/report.h"
#include "loadtest/report/report_json.h"
#include "loadtest/report/report_table.h"
#include "loadtest/speech/speech_driver.h"
#include "spdlog/spdlog.h"

namespace sluice::loadtest {
namespace {

constexpr double kDefaultDurationS = 30;  // measured seconds when neither -d nor -n bounds a run

// "auto" metrics URL: over HTTP, the same server; over gRPC, the HTTP port that pairs with the gRPC port by
// Triton's convention (8001 -> 8000).
std::string ResolveMetricsUrl(const AppOptions& o) {
  if (o.metrics_url != "auto") return o.metrics_url == "none" ? "" : o.metrics_url;
  if (o.protocol == "http") return absl::StrCat("http://", o.address, "/metrics");
  const size_t colon = o.address.rfind(':');
  if (colon == std::string::npos || o.address.substr(colon + 1) != "8001") return "";
  return absl::StrCat("http://", o.address.substr(0, colon), ":8000/metrics");
}

// Per-model length specs: "SPEC" applies to every model, "MODEL=SPEC" to one.
absl::StatusOr<std::map<std::string, std::string>> LengthSpecs(const std::vector<std::string>& specs) {
  std::map<std::string, std::string> out;
  for (const std::string& s : specs) {
    const size_t eq = s.find('=');
    if (eq == std::string::npos) {
      out[""] = s;
    } else {
      out[s.substr(0, eq)] = s.substr(eq + 1);
    }
  }
  return out;
}

absl::StatusOr<Pricing> ResolvePricing(const AppOptions& o) {
  Pricing pricing;
  if (!o.pricing_path.empty() || !o.preset.empty()) {
    if (o.pricing_path.empty() || o.preset.empty()) {
      return absl::InvalidArgumentError("--pricing and --preset go together");
    }
    absl::StatusOr<Pricing> loaded = LoadPricingPreset(o.pricing_path, o.preset);
    if (!loaded.ok()) return loaded.status();
    pricing = *loaded;
  } else {
    pricing.hourly_usd = o.hourly_usd;
    pricing.accelerators = o.accelerators > 0 ? o.accelerators : 1;
  }
  if (o.accelerators_used > 0) {
    if (o.accelerators_used > pricing.accelerators) {
      return absl::InvalidArgumentError(absl::StrCat("--accelerators-used ", o.accelerators_used, " exceeds the ",
                                                     pricing.accelerators, " accelerators of the instance"));
    }
    pricing.accelerators_used = o.accelerators_used;
  }
  return pricing;
}

// The driver of `api`: the one place that asks which API the run speaks.
std::unique_ptr<ApiDriver> MakeApiDriver(Api api) {
  switch (api) {
    case Api::kKServe:
      return MakeKServeDriver();
    case Api::kRivaOffline:
    case Api::kRivaStreaming:
    case Api::kOpenAiAudio:
      return MakeSpeechDriver(api);
    case Api::kOpenAi:
    case Api::kTritonStream:
      return MakeGenerationDriver(api);
  }
  return nullptr;
}

// RunApp's steps, in order. A step that fails prints why on stderr, sets exit_code_ and returns false; the
// checks (--verify, SLO verdicts, a sweep without a passing step) set kExitCheckFailed and go on.
// Thread-safety: one App runs on its caller's thread.
class App {
 public:
  explicit App(AppOptions options)
      : options_(std::move(options)),
        load_(options_.run.concurrency > 0 || options_.run.rate > 0 || options_.streaming.streams > 0 ||
              !options_.sweep.knob.empty()) {}

  int Run() {
    if (!CheckModes() || !ParseTraffic() || !LoadSloAndPricing() || !ConnectClient() || !DescribeModels() ||
        !VerifyModels() || !BuildWorkload() || !PrepareApi()) {
      return exit_code_;
    }
    if (options_.dry_run) {
      WritePaddingPlan();
      return exit_code_;
    }
    options_.run.arrival_seed = MixSeed(options_.seed, 0xa77a1);
    report_.options = options_.run;
    if (load_) {
      if (!MeasureUnderLoad()) return exit_code_;
    } else {
      report_.summary.per_model.resize(1);  // verify only: an empty table
    }
    WriteOutputs();
    return exit_code_;
  }

 private:
  bool Fail(int exit_code, absl::string_view message) {
    std::cerr << message << "\n";
    exit_code_ = exit_code;
    return false;
  }

  // Something to do, and one loop kind that fits the API.
  bool CheckModes() {
    if (!load_ && !options_.verify && !options_.dry_run) {
      return Fail(kExitUsage, "nothing to do: give --concurrency, --rate, --streams, --sweep, --verify or --dry-run");
    }
    if (options_.run.concurrency > 0 && options_.run.rate > 0) {
      return Fail(kExitUsage, "--concurrency (closed loop) and --rate (open loop) exclude each other");
    }
    if (absl::Status s = driver_->CheckOptions(options_); !s.ok()) return Fail(kExitUsage, s.message());
    if (options_.verify && options_.model_repository.empty()) {
      return Fail(kExitUsage, "--verify needs --model-repository (where each model's reference.pt lies)");
    }
    // Without an end a run would last until the hard caps (an hour): measure a bounded default instead, and say so.
    if (load_ && !options_.dry_run && options_.run.duration_s <= 0 && options_.run.requests <= 0) {
      options_.run.duration_s = kDefaultDurationS;
      spdlog::info("neither -d nor -n given: measuring {:g} s after warm-up{} (hard caps: --max-duration {:g} s, "
                   "--max-requests {})",
                   kDefaultDurationS, options_.sweep.knob.empty() ? "" : " per sweep step",
                   options_.run.max_duration_s, options_.run.max_requests);
    }
    return true;
  }

  // The arrival process, the model mix and the length specs.
  bool ParseTraffic() {
    absl::StatusOr<ArrivalKind> arrival = ParseArrivalKind(options_.arrival);
    if (!arrival.ok()) return Fail(kExitUsage, arrival.status().message());
    if (options_.run.burstiness != 1.0 && *arrival == ArrivalKind::kPoisson) arrival = ArrivalKind::kGamma;
    options_.run.arrival = *arrival;
    absl::StatusOr<std::vector<ModelShare>> mix = ParseModelMix(options_.model_mix);
    absl::StatusOr<std::map<std::string, std::string>> specs = LengthSpecs(options_.lengths);
    if (!mix.ok() || !specs.ok()) return Fail(kExitUsage, (!mix.ok() ? mix.status() : specs.status()).message());
    mix_ = *std::move(mix);
    length_specs_ = *std::move(specs);
    return true;
  }

  bool LoadSloAndPricing() {
    if (!options_.slo_path.empty()) {
      absl::StatusOr<SloSpec> loaded = LoadSlo(options_.slo_path);
      if (!loaded.ok()) return Fail(kExitUsage, loaded.status().message());
      slo_ = *loaded;
    }
    if (!options_.pricing_path.empty() || !options_.preset.empty() || options_.hourly_usd > 0) {
      absl::StatusOr<Pricing> pricing = ResolvePricing(options_);
      if (!pricing.ok()) return Fail(kExitUsage, pricing.status().message());
      pricing_ = *pricing;
    }
    return true;
  }

  bool ConnectClient() {
    if (options_.address.empty()) options_.address = options_.protocol == "http" ? "localhost:8000" : "localhost:8001";
    ClientOptions options;
    options.protocol = options_.protocol;
    options.address = options_.address;
    options.channels = options_.channels;
    options.bearer_token = options_.bearer_token;
    // HTTP holds one connection per call in flight: as many as the load can have.
    options.max_connections = std::max(options_.run.max_outstanding, options_.run.concurrency);
    for (double level : options_.sweep.levels) {
      options.max_connections = std::max(options.max_connections, static_cast<int>(level));
    }
    absl::StatusOr<std::unique_ptr<InferClient>> client = InferClient::Create(options);
    if (!client.ok()) return Fail(kExitUsage, client.status().message());
    client_ = *std::move(client);
    return true;
  }

  // Asks the server about every model in the mix.
  bool DescribeModels() {
    report_.target = options_.protocol == "http" ? absl::StrCat("http://", options_.address) : options_.address;
    report_.seed = options_.seed;
    for (const ModelShare& share : mix_) {
      if (!DescribeModel(share)) return false;
    }
    return true;
  }

  // The length spec for a model: its own, else the one for every model, else speech or uniform up to the largest
  // bucket.
  std::string LengthSpecFor(const std::string& model, const ModelInfo& info) const {
    if (auto it = length_specs_.find(model); it != length_specs_.end()) return it->second;
    if (auto it = length_specs_.find(""); it != length_specs_.end()) return it->second;
    if (info.kind == "generation") return "fixed:128";
    return info.is_speech() ? "speech" : absl::StrCat("uniform:1-", info.max_length);
  }

  bool DescribeModel(const ModelShare& share) {
    absl::StatusOr<ModelInfo> info = driver_->Describe(*client_, share.model, options_);
    if (!info.ok()) return Fail(kExitServer, absl::StrCat("model ", share.model, ": ", info.status().message()));
    std::string spec = LengthSpecFor(share.model, *info);
    absl::StatusOr<std::unique_ptr<LengthProfile>> profile =
        LengthProfile::Create(spec, info->sample_rate, info->max_length);
    if (!profile.ok()) {
      return Fail(kExitUsage, absl::StrCat("model ", share.model, ": ", profile.status().message()));
    }
    if (info->sample_rate_assumed) {
      spdlog::warn("model {}: no --model-repository to read the sample rate from; assuming 16000 Hz", share.model);
    }
    std::shared_ptr<const AudioFolder> audio;
    if (!options_.audio_dir.empty() && info->is_speech()) {
      absl::StatusOr<AudioFolder> folder = LoadAudioFolder(options_.audio_dir, info->sample_rate, info->max_length);
      if (!folder.ok()) {
        return Fail(kExitUsage, absl::StrCat("model ", share.model, ": ", folder.status().message()));
      }
      spec = absl::StrCat("audio:", options_.audio_dir, " (", folder->clips.size(), " clips, ",
                          folder->resampled > 0 ? absl::StrCat(folder->resampled, " resampled to ", info->sample_rate,
                                                               " Hz, ")
                                                : std::string(),
                          folder->truncated, " cut to the largest bucket)");
      audio = std::make_shared<const AudioFolder>(*std::move(folder));
    }
    report_.models.push_back({info->name, info->kind, spec, share.weight, info->max_length, info->sample_rate,
                              info->sample_rate_assumed});
    models_.push_back({*std::move(info), share.weight, *std::move(profile), std::move(audio)});
    return true;
  }

  bool VerifyModels() {
    if (!options_.verify) return true;
    for (const WorkloadModel& m : models_) {
      absl::StatusOr<VerifyReport> v = driver_->Verify(*client_, m.info, options_);
      if (!v.ok()) return Fail(kExitUsage, absl::StrCat("verify ", m.info.name, ": ", v.status().message()));
      if (!v->ok()) exit_code_ = kExitCheckFailed;
      report_.verify.push_back(*std::move(v));
    }
    return true;
  }

  // Token ids are drawn from [1, vocab): --vocab, else the vocabulary the server gives for the model (--api openai),
  // else 8192.
  int64_t EffectiveVocab() const {
    int64_t served = 0;
    for (const WorkloadModel& m : models_) {
      if (m.info.vocab_size > 0) served = served > 0 ? std::min(served, m.info.vocab_size) : m.info.vocab_size;
    }
    if (options_.vocab > 0) {
      if (served > 0 && options_.vocab > served) {
        spdlog::warn("--vocab {} is more than the server's vocab_size {}: ids from {} on will be refused", options_.vocab,
                     served, served);
      }
      return options_.vocab;
    }
    return served > 0 ? served : 8192;
  }

  bool BuildWorkload() {
    for (const WorkloadModel& m : models_) model_names_.push_back(m.info.name);
    vocab_ = EffectiveVocab();
    absl::StatusOr<std::unique_ptr<Workload>> workload =
        Workload::Create(std::move(models_), options_.seed, vocab_);
    if (!workload.ok()) return Fail(kExitUsage, workload.status().message());
    workload_ = *std::move(workload);
    return true;
  }

  // The API's own preparation (the server serves the models over it; the generation plan and client).
  bool PrepareApi() {
    report_.api = options_.api;
    if (options_.dry_run || !load_) return true;
    if (absl::Status s = driver_->Prepare(*client_, options_, *workload_, slo_, vocab_); !s.ok()) {
      return Fail(absl::IsFailedPrecondition(s) ? kExitServer : kExitUsage, s.message());
    }
    return true;
  }

  // One run of the API, summarised; `streams` > 0 replaces --streams (a sweep step).
  absl::StatusOr<RunSummary> RunAndSummarize(const RunOptions& options, RunResult& run, int streams = 0) {
    auto summarize = [this](const RunResult& r, double burstiness) { return SummarizeRun(r, burstiness); };
    return driver_->Run(options, streams, summarize, run, report_);
  }

  // --dry-run: the padding plan of the drawn requests, on stdout and optionally as JSON.
  bool WritePaddingPlan() {
    const std::vector<ModelPaddingPlan> plans =
        PlanPadding(*workload_, options_.run.first_index, options_.run.requests > 0 ? options_.run.requests : 1000);
    std::cout << FormatPaddingPlan(plans);
    if (options_.json_path.empty()) return true;
    if (absl::Status s = WritePaddingPlanJson(plans, options_.seed, options_.json_path); !s.ok()) {
      return Fail(kExitUsage, s.message());
    }
    return true;
  }

  RunSummary SummarizeRun(const RunResult& run, double burstiness) const {
    auto good = [this](const RequestRecord& r, double audio_s) { return MeetsRequestSlo(slo_, r, audio_s); };
    return loadtest::Summarize(run, *workload_, ArrivalKindName(options_.run.arrival), burstiness, good);
  }

  // Runs the load (or the sweep) between the server monitor's Begin and End, then fills in the server's
  // figures, the timeline, the histogram, the SLO verdicts and the cost.
  bool MeasureUnderLoad() {
    ServerMonitor monitor(MonitorOptions(), driver_->reads_server_statistics() ? client_.get() : nullptr);
    // The server's "before" snapshot is taken when warm-up ends, on the sending thread just before the first
    // measured request (a few ms; open-loop latency counts from the scheduled time anyway); for a sweep, before
    // its first step.
    bool begun = false;
    auto begin_monitor = [&] {
      if (!begun) monitor.Begin();
      begun = true;
    };
    if (!options_.sweep.knob.empty()) begin_monitor();
    options_.run.on_measure_start = begin_monitor;
    RunResult shown_run;
    const bool ran = options_.sweep.knob.empty() ? RunOnce(shown_run) : RunSweepSteps(shown_run);
    options_.run.on_measure_start = nullptr;  // it refers to this frame's monitor
    if (!ran) return false;
    begin_monitor();  // when nothing was measured
    report_.server = monitor.End();
    AddClientMinusServerTimes();
    report_.timeline = BuildTimeline(shown_run, 1.0);
    report_.histogram = BuildHistogram(shown_run, 40);
    JudgeSloAndCost();
    // Nothing succeeded: whatever else the report says, the run measured nothing (exit code 3, with why).
    const ThroughputStats& total = report_.summary.total;
    if (total.ok == 0) {
      exit_code_ = kExitServer;
      if (total.requests == 0) {
        spdlog::error("no measured request: nothing was sent after warm-up (give a longer -d or a larger -n)");
      } else {
        const auto first = total.first_error_by_code.find(total.errors_by_code.begin()->first);
        spdlog::error("no request succeeded ({} errors); first {}: {}", total.errors,
                      total.errors_by_code.begin()->first,
                      first != total.first_error_by_code.end() ? first->second : "(no message)");
      }
    }
    return true;
  }

  ServerMonitor::Options MonitorOptions() const {
    ServerMonitor::Options options;
    options.metrics_url = ResolveMetricsUrl(options_);
    options.interval_s = options_.scrape_interval_s;
    options.server_pid = options_.server_pid;
    options.models = model_names_;
    options.bearer_token = options_.bearer_token;
    return options;
  }

  bool RunOnce(RunResult& run) {
    absl::StatusOr<RunSummary> summary = RunAndSummarize(options_.run, run);
    if (!summary.ok()) return Fail(kExitUsage, summary.status().message());
    report_.summary = *std::move(summary);
    return true;
  }

  // One run per level; `shown_run` becomes the best passing step's run (or the last one's), for the table,
  // the timeline and the histogram.
  bool RunSweepSteps(RunResult& shown_run) {
    if (options_.sweep.levels.empty()) {
      const RunOptions& run = options_.run;
      const int streams = options_.streaming.streams;
      options_.sweep.start = options_.sweep.knob == "rate"    ? (run.rate > 0 ? run.rate : 1.0)
                             : options_.sweep.knob == "streams" ? (streams > 0 ? streams : 1.0)
                                                                : (run.concurrency > 0 ? run.concurrency : 1.0);
    }
    SloSpec sweep_slo = slo_;
    if (sweep_slo.empty()) sweep_slo.max_error_rate = 0.01;  // the default objective of a sweep
    std::vector<RunResult> step_runs;
    auto measure = [&](double level) -> absl::StatusOr<RunSummary> {
      RunOptions step = options_.run;
      step.concurrency = options_.sweep.knob == "concurrency" ? static_cast<int>(level) : 0;
      step.rate = options_.sweep.knob == "rate" ? level : 0;
      step.label = absl::StrCat(options_.sweep.knob, " ", level);
      RunResult run;
      const int streams = options_.sweep.knob == "streams" ? static_cast<int>(level) : 0;
      absl::StatusOr<RunSummary> summary = RunAndSummarize(step, run, streams);
      step_runs.push_back(std::move(run));
      return summary;
    };
    if (absl::Status s = RunSweep(options_.sweep, sweep_slo, measure, report_.sweep, report_.sweep_best); !s.ok()) {
      return Fail(absl::IsInvalidArgument(s) ? kExitUsage : kExitServer, s.message());
    }
    if (!report_.sweep_best) exit_code_ = kExitCheckFailed;
    const size_t shown = report_.sweep_best.value_or(report_.sweep.size() - 1);
    report_.summary = report_.sweep[shown].summary;
    shown_run = std::move(step_runs[shown]);
    return true;
  }

  // Per model (single runs of an API whose call is one server inference): the client's mean latency minus the
  // server's.
  void AddClientMinusServerTimes() {
    if (!options_.sweep.knob.empty() || !driver_->compares_server_latency()) return;
    for (ModelServerStats& st : report_.server->model_stats) {
      for (const ThroughputStats& m : report_.summary.per_model) {
        if (m.model == st.model && m.latency.count > 0 && st.inferences > 0) {
          st.client_minus_server_ms = m.latency.mean_ms - st.server_ms_mean;
        }
      }
    }
  }

  void JudgeSloAndCost() {
    if (!options_.slo_path.empty()) {
      report_.slo = slo_;
      report_.verdicts = Evaluate(slo_, report_.summary);
      if (!AllPass(report_.verdicts)) exit_code_ = kExitCheckFailed;
    }
    if (pricing_) {
      report_.pricing = pricing_;
      report_.cost = ComputeCost(*pricing_, report_.summary);
    }
  }

  // The table (or the verify results) on stdout, then the JSON report and the SVG plot when asked for.
  bool WriteOutputs() {
    std::cout << (load_ ? FormatReport(report_) : FormatVerify(report_.verify));
    if (!options_.json_path.empty()) {
      if (absl::Status s = WriteReportJson(report_, options_.json_path); !s.ok()) return Fail(kExitUsage, s.message());
    }
    if (!options_.svg_path.empty() && load_) {
      if (absl::Status s = WriteSvg(report_, options_.svg_path); !s.ok()) return Fail(kExitUsage, s.message());
    }
    return true;
  }

  AppOptions options_;
  const bool load_;  // a run or a sweep (not only --verify or --dry-run)
  int exit_code_ = kExitOk;
  std::vector<ModelShare> mix_;
  std::map<std::string, std::string> length_specs_;  // by model; "" for every model
  SloSpec slo_;
  std::optional<Pricing> pricing_;
  std::unique_ptr<InferClient> client_;
  std::vector<WorkloadModel> models_;  // until BuildWorkload moves them into workload_
  std::vector<std::string> model_names_;
  std::unique_ptr<Workload> workload_;
  int64_t vocab_ = 8192;  // token ids are drawn from [1, vocab_)
  // --api's, the one API-specific part of the run; after client_ and workload_, which it refers to once prepared.
  const std::unique_ptr<ApiDriver> driver_ = MakeApiDriver(options_.api);
  Report report_;
};

}  // namespace

int RunApp(AppOptions options) { return App(std::move(options)).Run(); }

}  // namespace sluice::loadtest
