#include "loadtest/monitor/server_monitor.h"

#include <cstring>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sluice::loadtest {
namespace {

bool IsSluice(absl::string_view name) { return absl::StartsWith(name, "sluice_"); }

// The first histogram family (by name) accepted by `match`.
std::optional<std::string> FindHistogram(const PromScrape& scrape,
                                         const std::function<bool(absl::string_view)>& match) {
  for (const std::string& family : scrape.HistogramFamilies()) {
    if (IsSluice(family) && match(family)) return family;
  }
  return std::nullopt;
}

// Δsum / Δcount of a histogram family between two scrapes (× scale).
std::optional<double> MeanDelta(const PromScrape& before, const PromScrape& after, const std::string& family,
                                double scale) {
  const std::optional<double> sum1 = after.Sum(family + "_sum"), count1 = after.Sum(family + "_count");
  if (!sum1 || !count1) return std::nullopt;
  const double sum = *sum1 - before.Sum(family + "_sum").value_or(0);
  const double count = *count1 - before.Sum(family + "_count").value_or(0);
  if (count <= 0) return std::nullopt;
  return sum / count * scale;
}

bool IsRssName(absl::string_view name) {
  return absl::StrContains(name, "resident_memory") || absl::StrContains(name, "rss");
}
bool IsPeakName(absl::string_view name) {
  return absl::StrContains(name, "peak") || absl::StrContains(name, "max") || absl::StrContains(name, "hwm");
}

}  // namespace

std::optional<double> CurrentRss(const PromScrape& scrape) {
  std::optional<double> rss;
  for (const std::string& name : scrape.Names()) {
    if (IsRssName(name) && !IsPeakName(name)) {
      if (std::optional<double> v = scrape.Max(name)) rss = std::max(rss.value_or(0), *v);
    }
  }
  return rss;
}

std::optional<double> ProcPeakRss(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (in >> key) {
    if (key == "VmHWM:") {
      double kb = 0;
      in >> kb;
      return kb * 1024.0;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return std::nullopt;
}

void DeriveFromScrapes(const PromScrape& before, const PromScrape& after, std::optional<double> peak_rss_seen,
                       ServerMetrics& out) {
  out.metrics_scraped = true;
  for (const std::string& name : after.Names()) {
    if (IsSluice(name)) out.sluice_series.push_back(name);
  }
  auto seconds = [](absl::string_view f) { return absl::EndsWith(f, "_seconds"); };
  if (auto f = FindHistogram(after, [&](absl::string_view n) { return absl::StrContains(n, "queue") && seconds(n); })) {
    out.queue_ms_mean = MeanDelta(before, after, *f, 1e3);
  }
  if (auto f = FindHistogram(after,
                             [&](absl::string_view n) { return absl::StrContains(n, "compute") && seconds(n); })) {
    out.compute_ms_mean = MeanDelta(before, after, *f, 1e3);
  }
  if (auto f = FindHistogram(after, [&](absl::string_view n) {
        return absl::StrContains(n, "request") &&
               (absl::StrContains(n, "latency") || absl::StrContains(n, "duration")) && seconds(n);
      })) {
    out.server_latency_ms_mean = MeanDelta(before, after, *f, 1e3);
  }
  if (auto f = FindHistogram(after, [](absl::string_view n) { return absl::StrContains(n, "batch_size"); })) {
    out.batch_size_mean = MeanDelta(before, after, *f, 1.0);
  }
  for (const std::string& name : after.Names()) {
    if (IsRssName(name) && IsPeakName(name)) {
      out.peak_rss_bytes = after.Max(name);
      out.peak_rss_source = name;
    }
  }
  if (!out.peak_rss_bytes) {
    std::optional<double> now = CurrentRss(after);
    if (now || peak_rss_seen) {
      out.peak_rss_bytes = std::max(now.value_or(0), peak_rss_seen.value_or(0));
      out.peak_rss_source = "largest RSS gauge seen during the run";
    }
  }
  // Padding efficiency of this run: Δ real / Δ computed samples per model, when the server counts both.
  for (const std::string& real : after.Names()) {
    if (!IsSluice(real) || !absl::EndsWith(real, "real_samples_total")) continue;
    const std::string computed = absl::StrCat(real.substr(0, real.size() - strlen("real_samples_total")),
                                              "computed_samples_total");
    for (const std::string& model : after.LabelValues(real, "model")) {
      const double r = *after.Sum(real, "model", model) - before.Sum(real, "model", model).value_or(0);
      const double c =
          after.Sum(computed, "model", model).value_or(0) - before.Sum(computed, "model", model).value_or(0);
      if (c > 0) out.padding_efficiency[model] = r / c;
    }
  }
  for (const std::string& name : after.Names()) {
    if (!IsSluice(name)) continue;
    if (absl::StrContains(name, "load_seconds")) out.load_seconds = out.load_seconds.value_or(0) + *after.Sum(name);
    if (absl::StrContains(name, "warm_seconds")) out.warm_seconds = out.warm_seconds.value_or(0) + *after.Sum(name);
    if (absl::StrContains(name, "padding_efficiency") && out.padding_efficiency.empty()) {
      for (const PromSample& s : after.samples) {
        if (s.name == name && s.Label("bucket").empty()) out.padding_efficiency[s.Label("model")] = s.value;
      }
    }
    if (absl::StrContains(name, "dollar") || absl::StrContains(name, "usd")) {
      out.cost_gauges[name] = *after.Sum(name);
    }
  }
}

std::vector<std::string> GenerationPeakGauges() {
  return {"sluice_generation_running", "sluice_generation_waiting", "sluice_generation_kv_slots_in_use"};
}

void DeriveGeneration(const PromScrape& before, const PromScrape& after, const std::map<std::string, double>& peaks,
                      ServerMetrics& out) {
  auto delta = [&](const char* name, const char* key = "", const char* value = "") -> std::optional<double> {
    const std::optional<double> a = after.Sum(name, key, value);
    if (!a) return std::nullopt;
    return *a - before.Sum(name, key, value).value_or(0);
  };
  auto put = [&](const char* key, std::optional<double> v) {
    if (v) out.generation[key] = *v;
  };
  put("requests", delta("sluice_generation_requests_total"));
  if (out.generation.empty()) return;  // no generation model
  put("requests_ok", delta("sluice_generation_requests_total", "outcome", "ok"));
  put("prompt_tokens", delta("sluice_generation_prompt_tokens_total"));
  put("output_tokens", delta("sluice_generation_output_tokens_total"));
  put("queue_ms_mean", MeanDelta(before, after, "sluice_generation_queue_time_seconds", 1e3));
  put("ttft_ms_mean", MeanDelta(before, after, "sluice_generation_time_to_first_token_seconds", 1e3));
  put("itl_ms_mean", MeanDelta(before, after, "sluice_generation_inter_token_latency_seconds", 1e3));
  put("e2e_ms_mean", MeanDelta(before, after, "sluice_generation_e2e_latency_seconds", 1e3));
  const std::optional<double> rows = delta("sluice_generation_decode_rows_total");
  const std::optional<double> steps = delta("sluice_generation_step_seconds_count", "step", "decode");
  if (rows && steps && *steps > 0) out.generation["decode_batch_mean"] = *rows / *steps;
  put("kv_slots", after.Sum("sluice_generation_kv_slots"));
  for (const std::string& gauge : GenerationPeakGauges()) {
    double peak = std::max(before.Sum(gauge).value_or(0), after.Sum(gauge).value_or(0));
    if (auto it = peaks.find(gauge); it != peaks.end()) peak = std::max(peak, it->second);
    out.generation[gauge.substr(std::string("sluice_generation_").size()) + "_peak"] = peak;
  }
}

ServerMonitor::ServerMonitor(Options options, InferClient* client)
    : options_(std::move(options)), client_(client) {}

ServerMonitor::~ServerMonitor() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stopped_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
}

std::map<std::string, inference::ModelStatistics> ServerMonitor::FetchModelStatistics() {
  std::map<std::string, inference::ModelStatistics> stats;
  if (client_ == nullptr) return stats;
  for (const std::string& model : options_.models) {
    inference::ModelStatisticsResponse response;
    if (client_->ModelStatistics(model, &response).ok() && response.model_stats_size() == 1) {
      stats[model] = response.model_stats(0);
    }
  }
  return stats;
}

std::optional<PromScrape> ServerMonitor::Scrape(std::string* error) {
  if (options_.metrics_url.empty()) return std::nullopt;
  absl::StatusOr<std::string> text = HttpGet(options_.metrics_url, 5.0, options_.bearer_token);
  if (!text.ok()) {
    if (error) *error = std::string(text.status().message());
    return std::nullopt;
  }
  absl::StatusOr<PromScrape> scrape = ParsePrometheusText(*text);
  if (!scrape.ok()) {
    if (error) *error = std::string(scrape.status().message());
    return std::nullopt;
  }
  return *std::move(scrape);
}

void ServerMonitor::Begin() {
  stats_before_ = FetchModelStatistics();
  scrape_before_ = Scrape(&scrape_error_);
  if (!scrape_before_) return;  // nothing to poll
  thread_ = std::thread([this] {
    while (true) {
      {
        const absl::Time next_scrape = absl::Now() + absl::Seconds(options_.interval_s);
        MutexLock lock(&mu_);
        while (!stop_ && absl::Now() < next_scrape) stopped_.WaitUntil(&mu_, next_scrape);
        if (stop_) return;
      }
      if (std::optional<PromScrape> scrape = Scrape(nullptr)) {
        MutexLock lock(&mu_);
        if (std::optional<double> rss = CurrentRss(*scrape)) {
          peak_rss_seen_ = std::max(peak_rss_seen_.value_or(0), *rss);
        }
        for (const std::string& gauge : GenerationPeakGauges()) {
          if (std::optional<double> v = scrape->Sum(gauge)) gauge_peaks_[gauge] = std::max(gauge_peaks_[gauge], *v);
        }
      }
    }
  });
}

ServerMetrics ServerMonitor::End() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
    stopped_.SignalAll();
  }
  if (thread_.joinable()) thread_.join();
  ServerMetrics out;
  for (const auto& [model, after] : FetchModelStatistics()) {
    auto it = stats_before_.find(model);
    const inference::ModelStatistics before = it == stats_before_.end() ? inference::ModelStatistics() : it->second;
    ModelServerStats s;
    s.model = model;
    s.inferences = static_cast<int64_t>(after.inference_count() - before.inference_count());
    s.executions = static_cast<int64_t>(after.execution_count() - before.execution_count());
    auto mean_ms = [](const inference::StatisticDuration& a, const inference::StatisticDuration& b) {
      const double count = static_cast<double>(a.count()) - static_cast<double>(b.count());
      return count > 0 ? (static_cast<double>(a.ns()) - static_cast<double>(b.ns())) / count / 1e6 : 0.0;
    };
    s.queue_ms_mean = mean_ms(after.inference_stats().queue(), before.inference_stats().queue());
    s.compute_ms_mean = mean_ms(after.inference_stats().compute_infer(), before.inference_stats().compute_infer());
    s.server_ms_mean = mean_ms(after.inference_stats().success(), before.inference_stats().success());
    s.rows_per_execution = s.executions > 0 ? static_cast<double>(s.inferences) / s.executions : 0;
    out.model_stats.push_back(s);
  }
  std::string error;
  std::optional<PromScrape> after = scrape_before_ ? Scrape(&error) : std::nullopt;
  if (scrape_before_ && after) {
    std::optional<double> peak_rss_seen;
    std::map<std::string, double> peaks;
    {
      MutexLock lock(&mu_);
      peak_rss_seen = peak_rss_seen_;
      peaks = gauge_peaks_;
    }
    DeriveFromScrapes(*scrape_before_, *after, peak_rss_seen, out);
    DeriveGeneration(*scrape_before_, *after, peaks, out);
  } else if (!options_.metrics_url.empty()) {
    out.metrics_error = scrape_error_.empty() ? error : scrape_error_;
  }
  if (!out.peak_rss_bytes && options_.server_pid > 0) {
    out.peak_rss_bytes = ProcPeakRss(options_.server_pid);
    if (out.peak_rss_bytes) out.peak_rss_source = absl::StrCat("VmHWM of pid ", options_.server_pid);
  }
  return out;
}

}  // namespace sluice::loadtest
