#include "loadtest/app.h"

#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "loadtest/infer_client.h"
#include "loadtest/padding_plan.h"
#include "loadtest/plot_svg.h"
#include "loadtest/report.h"
#include "loadtest/report_json.h"
#include "loadtest/report_table.h"
#include "spdlog/spdlog.h"

namespace sluice::loadtest {
namespace {

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

}  // namespace

int RunApp(AppOptions o) {
  const bool load = o.run.concurrency > 0 || o.run.rate > 0 || !o.sweep.knob.empty();
  if (!load && !o.verify && !o.dry_run) {
    std::cerr << "nothing to do: give --concurrency, --rate, --sweep, --verify or --dry-run\n";
    return kExitUsage;
  }
  if (o.run.concurrency > 0 && o.run.rate > 0) {
    std::cerr << "--concurrency (closed loop) and --rate (open loop) exclude each other\n";
    return kExitUsage;
  }
  if (o.verify && o.model_repository.empty()) {
    std::cerr << "--verify needs --model-repository (where each model's reference.pt lies)\n";
    return kExitUsage;
  }
  absl::StatusOr<ArrivalKind> arrival = ParseArrivalKind(o.arrival);
  if (!arrival.ok()) {
    std::cerr << arrival.status().message() << "\n";
    return kExitUsage;
  }
  if (o.run.burstiness != 1.0 && *arrival == ArrivalKind::kPoisson) arrival = ArrivalKind::kGamma;
  o.run.arrival = *arrival;
  absl::StatusOr<std::vector<ModelShare>> mix = ParseModelMix(o.model_mix);
  absl::StatusOr<std::map<std::string, std::string>> specs = LengthSpecs(o.lengths);
  if (!mix.ok() || !specs.ok()) {
    std::cerr << (!mix.ok() ? mix.status() : specs.status()).message() << "\n";
    return kExitUsage;
  }
  SloSpec slo;
  if (!o.slo_path.empty()) {
    absl::StatusOr<SloSpec> loaded = LoadSlo(o.slo_path);
    if (!loaded.ok()) {
      std::cerr << loaded.status().message() << "\n";
      return kExitUsage;
    }
    slo = *loaded;
  }
  std::optional<Pricing> pricing;
  if (!o.pricing_path.empty() || !o.preset.empty() || o.hourly_usd > 0) {
    absl::StatusOr<Pricing> p = ResolvePricing(o);
    if (!p.ok()) {
      std::cerr << p.status().message() << "\n";
      return kExitUsage;
    }
    pricing = *p;
  }

  if (o.address.empty()) o.address = o.protocol == "http" ? "localhost:8000" : "localhost:8001";
  InferClient::Options client_options;
  client_options.protocol = o.protocol;
  client_options.address = o.address;
  client_options.channels = o.channels;
  client_options.bearer_token = o.bearer_token;
  // HTTP holds one connection per call in flight: as many as the load can have.
  client_options.max_connections = std::max(o.run.max_outstanding, o.run.concurrency);
  for (double level : o.sweep.levels) {
    client_options.max_connections = std::max(client_options.max_connections, static_cast<int>(level));
  }
  absl::StatusOr<std::unique_ptr<InferClient>> client = InferClient::Create(client_options);
  if (!client.ok()) {
    std::cerr << client.status().message() << "\n";
    return kExitUsage;
  }

  // Ask the server about every model in the mix.
  Report report;
  report.target = o.protocol == "http" ? absl::StrCat("http://", o.address) : o.address;
  report.seed = o.seed;
  std::vector<WorkloadModel> models;
  for (const ModelShare& share : *mix) {
    absl::StatusOr<ModelInfo> info = FetchModelInfo(**client, share.model, o.model_repository, o.max_length);
    if (!info.ok()) {
      std::cerr << "model " << share.model << ": " << info.status().message() << "\n";
      return kExitServer;
    }
    std::string spec = specs->count(share.model) ? specs->at(share.model)
                       : specs->count("")        ? specs->at("")
                       : info->is_speech()       ? "speech"
                                                 : absl::StrCat("uniform:1-", info->max_length);
    absl::StatusOr<std::unique_ptr<LengthProfile>> profile = LengthProfile::Create(spec, info->sample_rate,
                                                                                   info->max_length);
    if (!profile.ok()) {
      std::cerr << "model " << share.model << ": " << profile.status().message() << "\n";
      return kExitUsage;
    }
    if (info->sample_rate_assumed) {
      spdlog::warn("model {}: no --model-repository to read the sample rate from; assuming 16000 Hz", share.model);
    }
    std::shared_ptr<const AudioFolder> audio;
    if (!o.audio_dir.empty() && info->is_speech()) {
      absl::StatusOr<AudioFolder> folder = LoadAudioFolder(o.audio_dir, info->sample_rate, info->max_length);
      if (!folder.ok()) {
        std::cerr << "model " << share.model << ": " << folder.status().message() << "\n";
        return kExitUsage;
      }
      spec = absl::StrCat("audio:", o.audio_dir, " (", folder->clips.size(), " clips, ", folder->truncated,
                          " cut to the largest bucket)");
      audio = std::make_shared<const AudioFolder>(*std::move(folder));
    }
    report.models.push_back({info->name, info->kind, spec, share.weight, info->max_length, info->sample_rate,
                             info->sample_rate_assumed});
    models.push_back({*std::move(info), share.weight, *std::move(profile), std::move(audio)});
  }

  int exit_code = kExitOk;
  if (o.verify) {
    for (const WorkloadModel& m : models) {
      absl::StatusOr<VerifyReport> v = VerifyModel(**client, m.info, o.model_repository, o.tolerance,
                                                   o.run.timeout_ms);
      if (!v.ok()) {
        std::cerr << "verify " << m.info.name << ": " << v.status().message() << "\n";
        return kExitUsage;
      }
      if (!v->ok()) exit_code = kExitCheckFailed;
      report.verify.push_back(*std::move(v));
    }
  }

  std::vector<std::string> model_names;
  for (const WorkloadModel& m : models) model_names.push_back(m.info.name);
  absl::StatusOr<std::unique_ptr<Workload>> workload = Workload::Create(std::move(models), o.seed, o.vocab);
  if (!workload.ok()) {
    std::cerr << workload.status().message() << "\n";
    return kExitUsage;
  }
  if (o.dry_run) {
    const std::vector<ModelPaddingPlan> plans =
        PlanPadding(**workload, o.run.first_index, o.run.requests > 0 ? o.run.requests : 1000);
    std::cout << FormatPaddingPlan(plans);
    if (!o.json_path.empty()) {
      if (absl::Status s = WritePaddingPlanJson(plans, o.seed, o.json_path); !s.ok()) {
        std::cerr << s.message() << "\n";
        return kExitUsage;
      }
    }
    return exit_code;
  }
  o.run.arrival_seed = MixSeed(o.seed, 0xa77a1);
  report.options = o.run;
  const std::string arrival_name = ArrivalKindName(o.run.arrival);
  auto good = [&slo](const RequestRecord& r, double audio_s) { return MeetsRequestSlo(slo, r, audio_s); };

  if (load) {
    ServerMonitor::Options monitor_options;
    monitor_options.metrics_url = ResolveMetricsUrl(o);
    monitor_options.interval_s = o.scrape_interval_s;
    monitor_options.server_pid = o.server_pid;
    monitor_options.models = model_names;
    monitor_options.bearer_token = o.bearer_token;
    ServerMonitor monitor(monitor_options, client->get());
    // The server's "before" snapshot is taken when warm-up ends, on the sending thread just before the first
    // measured request (a few ms; open-loop latency counts from the scheduled time anyway); for a sweep, before
    // its first step.
    bool begun = false;
    auto begin_monitor = [&] {
      if (!begun) monitor.Begin();
      begun = true;
    };
    if (!o.sweep.knob.empty()) begin_monitor();
    o.run.on_measure_start = begin_monitor;

    RunResult last_run;
    std::vector<RunResult> step_runs;  // a sweep's runs, for the best step's timeline and histogram
    if (!o.sweep.knob.empty()) {
      if (o.sweep.levels.empty()) {
        o.sweep.start = o.sweep.knob == "rate" ? (o.run.rate > 0 ? o.run.rate : 1.0)
                                               : (o.run.concurrency > 0 ? o.run.concurrency : 1.0);
      }
      SloSpec sweep_slo = slo;
      if (sweep_slo.empty()) sweep_slo.max_error_rate = 0.01;  // the default objective of a sweep
      auto measure = [&](double level) -> absl::StatusOr<RunSummary> {
        RunOptions step = o.run;
        step.concurrency = o.sweep.knob == "concurrency" ? static_cast<int>(level) : 0;
        step.rate = o.sweep.knob == "rate" ? level : 0;
        step.label = absl::StrCat(o.sweep.knob, " ", level);
        absl::StatusOr<RunResult> run = RunLoad(step, **workload, **client);
        if (!run.ok()) return run.status();
        step_runs.push_back(*std::move(run));
        return Summarize(step_runs.back(), **workload, arrival_name, step.burstiness, good);
      };
      if (absl::Status s = RunSweep(o.sweep, sweep_slo, measure, report.sweep, report.sweep_best); !s.ok()) {
        std::cerr << s.message() << "\n";
        return absl::IsInvalidArgument(s) ? kExitUsage : kExitServer;
      }
      if (!report.sweep_best) exit_code = kExitCheckFailed;
      // The table, timeline and histogram show the best passing step (or the last one).
      const size_t shown = report.sweep_best.value_or(report.sweep.size() - 1);
      report.summary = report.sweep[shown].summary;
      last_run = std::move(step_runs[shown]);
      step_runs.clear();
    } else {
      absl::StatusOr<RunResult> run = RunLoad(o.run, **workload, **client);
      if (!run.ok()) {
        std::cerr << run.status().message() << "\n";
        return kExitUsage;
      }
      last_run = *std::move(run);
      report.summary = Summarize(last_run, **workload, arrival_name, o.run.burstiness, good);
    }
    begin_monitor();  // when nothing was measured
    report.server = monitor.End();
    for (ModelServerStats& st : report.server->model_stats) {
      for (const ThroughputStats& m : report.summary.per_model) {
        if (m.model == st.model && m.latency.count > 0 && st.inferences > 0 && o.sweep.knob.empty()) {
          st.client_minus_server_ms = m.latency.mean_ms - st.server_ms_mean;
        }
      }
    }
    report.timeline = BuildTimeline(last_run, 1.0);
    report.histogram = BuildHistogram(last_run, 40);
    if (!o.slo_path.empty()) {
      report.slo = slo;
      report.verdicts = Evaluate(slo, report.summary);
      if (!AllPass(report.verdicts)) exit_code = kExitCheckFailed;
    }
    if (pricing) {
      report.pricing = pricing;
      report.cost = ComputeCost(*pricing, report.summary);
    }
    if (report.summary.total.ok == 0 && report.summary.total.requests > 0) {
      spdlog::error("no request succeeded; first error: {}", report.summary.total.errors_by_code.begin()->first);
    }
  } else {
    report.summary.per_model.resize(1);  // verify only: an empty table
  }

  std::cout << (load ? FormatReport(report) : FormatVerify(report.verify));
  if (!o.json_path.empty()) {
    if (absl::Status s = WriteReportJson(report, o.json_path); !s.ok()) {
      std::cerr << s.message() << "\n";
      return kExitUsage;
    }
  }
  if (!o.svg_path.empty() && load) {
    if (absl::Status s = WriteSvg(report, o.svg_path); !s.ok()) {
      std::cerr << s.message() << "\n";
      return kExitUsage;
    }
  }
  return exit_code;
}

}  // namespace sluice::loadtest
