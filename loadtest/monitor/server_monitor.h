// The server's own view of a run: Triton's ModelStatistics over the client's protocol (per-request queue and
// compute time, rows per graph execution) before and after the run, and the Prometheus /metrics page scraped
// before, during (every interval, for the memory peak) and after. Series are looked up by pattern, not by exact
// name, and whatever the server does not export is reported as absent, so this works with any /metrics or none.
//   queue / compute / server latency: Δ_sum / Δ_count of the sluice_* histograms named *queue*_seconds,
//     *compute*_seconds, *request*latency*_seconds (or *request*duration*_seconds)
//   batch size: Δ_sum / Δ_count of a sluice_* histogram named *batch_size*
//   peak RSS: a gauge named *peak*/max* with rss/resident_memory in it, else the largest
//     process_resident_memory_bytes (or *resident_memory*/*rss*) seen, else VmHWM of --server-pid
//   load / warm time: sums over every series of the gauges named *load_seconds* / *warm_seconds*
//   generation (sluice_generation_*, when exported): Δ requests (all, and outcome="ok"), Δ prompt/output tokens,
//     mean queue time / TTFT / ITL / e2e (Δsum/Δcount), mean decode batch (Δ decode rows / Δ decode steps), the
//     peaks of running / waiting / kv_slots_in_use seen by the scrapes, and kv_slots
//   padding efficiency: per model, Δ *real_samples_total / Δ *computed_samples_total over the run, else the
//     gauges named *padding_efficiency* (server lifetime)
// Thread-safety: Begin() and End() from one thread; an internal thread scrapes between them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backend/base/sync.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/monitor/prometheus_text.h"

namespace sluice::loadtest {

struct ModelServerStats {
  std::string model;
  int64_t inferences = 0, executions = 0;
  double queue_ms_mean = 0, compute_ms_mean = 0, server_ms_mean = 0;  // per successful row
  double rows_per_execution = 0;
  // The client's mean latency for this model minus server_ms_mean: transport, (de)serialisation and client
  // time. Filled by the caller, which knows the client's figures; nullopt when not computed.
  std::optional<double> client_minus_server_ms;
};

struct ServerMetrics {
  std::vector<ModelServerStats> model_stats;  // from gRPC ModelStatistics; empty when unavailable
  bool metrics_scraped = false;
  std::string metrics_error;  // why /metrics was not read (empty when it was, or when no URL was given)
  std::optional<double> queue_ms_mean, compute_ms_mean, server_latency_ms_mean, batch_size_mean;
  std::optional<double> peak_rss_bytes;
  std::string peak_rss_source;
  std::optional<double> load_seconds, warm_seconds;
  std::map<std::string, double> padding_efficiency;  // by model label ("" when unlabelled)
  std::map<std::string, double> cost_gauges;         // sluice_* series about dollars, as exported
  std::vector<std::string> sluice_series;            // every sluice_* sample name seen
  std::map<std::string, double> generation;          // the generation figures above, by key (absent: not exported)
};

// The gauges whose peak over the run matters for generation (running, waiting, KV slots in use).
std::vector<std::string> GenerationPeakGauges();
// Fills out.generation from two scrapes and the gauge peaks seen in between (by gauge name).
void DeriveGeneration(const PromScrape& before, const PromScrape& after, const std::map<std::string, double>& peaks,
                      ServerMetrics& out);

// Derives the /metrics part from two scrapes; `peak_rss_seen` is the largest RSS gauge seen in between.
void DeriveFromScrapes(const PromScrape& before, const PromScrape& after, std::optional<double> peak_rss_seen,
                       ServerMetrics& out);

class ServerMonitor {
 public:
  struct Options {
    std::string metrics_url;  // empty: no scraping
    double interval_s = 1.0;
    int server_pid = 0;       // > 0: read the peak RSS (VmHWM) from /proc/<pid>/status as a fallback
    std::vector<std::string> models;
    std::string bearer_token;  // for /metrics
  };

  // REQUIRES: `client` outlives the monitor (may be null: no ModelStatistics).
  ServerMonitor(Options options, InferClient* client);
  ~ServerMonitor();

  void Begin();
  ServerMetrics End();

  ServerMonitor(const ServerMonitor&) = delete;
  ServerMonitor& operator=(const ServerMonitor&) = delete;

 private:
  std::map<std::string, inference::ModelStatistics> FetchModelStatistics();
  std::optional<PromScrape> Scrape(std::string* error);

  const Options options_;
  InferClient* const client_;
  // The Begin/End thread's own; the scraping thread never touches them.
  std::map<std::string, inference::ModelStatistics> stats_before_;
  std::optional<PromScrape> scrape_before_;
  std::string scrape_error_;
  std::thread thread_;

  Mutex mu_;  // shared with the scraping thread; never held while scraping
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  CondVar stopped_;  // signalled when stop_ is set
  std::optional<double> peak_rss_seen_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, double> gauge_peaks_ ABSL_GUARDED_BY(mu_);
};

// The largest value of any RSS gauge in one scrape (process_resident_memory_bytes and the like).
std::optional<double> CurrentRss(const PromScrape& scrape);
// VmHWM of a local process in bytes; nullopt when it cannot be read.
std::optional<double> ProcPeakRss(int pid);

}  // namespace sluice::loadtest
