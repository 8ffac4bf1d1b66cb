// sluice's Prometheus metrics (prometheus-cpp), rendered in the text format at /metrics on the HTTP port.
// Every name starts with sluice_; labels are `model` and, where bounded by the config, `bucket`/`batch_size`/
// `instance`. Histograms (not summaries) so that replicas aggregate. Cost gauges appear when the server config
// has `cost:`; their definitions are in backend/base/cost.h and README "Cost metrics".
//
// Generation models add only their cost here (AddGenerationModelCost); the rest of their series are theirs.
// Recording paths: ModelMetrics::RecordArrival once per validated request offered to the scheduler (its length:
// sluice_request_length, and the capacity estimator's arrival mix), RecordRequest once per client request (its
// outcome), RecordRow once per row that ran, RecordBatch from the scheduler's BatchObserver (instance threads).
// Gauges that mirror live state (queue depth, in-flight, readiness, busy ratio, padding efficiency, capacity,
// cost, process) are computed at Render().
// Thread-safety: every method is safe from any thread (prometheus-cpp metrics are thread-safe; each model's
// CapacityEstimator has its own mutex, a leaf). No mutex here: the fields that are not metrics are set before
// serving (AddModel) and only read after.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backend/backend.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "backend/base/cost.h"
#include "server/metrics/capacity_estimator.h"

namespace sluice {

enum class RequestOutcome { kOk, kInvalid, kRejected, kTimeout, kCancelled, kBackendError };
inline constexpr int kNumOutcomes = 6;
const char* OutcomeName(RequestOutcome outcome);
// ok / invalid (bad input, unknown version) / rejected (queue full, draining) / timeout / cancelled / backend_error.
RequestOutcome OutcomeFor(const absl::Status& status);

// sluice_request_length's boundaries for a model (integer lengths in its steps): ceil(r^k) for k = 0, 1, ... below
// the largest compiled length, r = max(1.05, largest^(1/199)) (5 % apart, wider only when 200 would not reach
// the largest length: 6.5 % for 256000 samples), every compiled length added, duplicates dropped. So at most
// 200 + (compiled lengths) boundaries; every length up to 20 has its own; each compiled length is a boundary
// (le="<bucket>" counts exactly the requests that fit that bucket).
std::vector<double> RequestLengthBoundaries(const std::vector<int64_t>& compiled_lengths);

class ServerMetrics;

class ModelMetrics {
 public:
  // One client request (all its rows) has been answered. `length` is its real length along the variable axis;
  // 0 for a request refused before it was queued (only its outcome is counted).
  void RecordRequest(const absl::Status& status, absl::Duration latency, int64_t rows, int64_t length);
  // A validated request of `rows` rows and real length `length` is offered to the scheduler (before Enqueue, so
  // a refusal for a full queue still counts as demand).
  void RecordArrival(int64_t rows, int64_t length);
  // A row that was queued has been answered (its queue wait).
  void RecordRow(const InferResponse& response);
  void RecordBatch(const BatchReport& report);

 private:
  friend class ServerMetrics;
  ModelMetrics() = default;
  void Refresh(absl::Time now, double elapsed_seconds, const CostMeter* cost);

  // ServerMetrics::AddModel's steps: each adds one group of this model's series to `r` (in this order, which is
  // the order of families on /metrics). REQUIRES: config_ set.
  prometheus::Labels Labels() const;  // {model}
  prometheus::Labels LabelsWith(std::string key, std::string value) const;  // {model, key=value}
  void AddRequestHistograms(prometheus::Registry& r);
  void AddBucketSeries(prometheus::Registry& r);
  void AddCounters(prometheus::Registry& r);
  void AddInstanceSeries(prometheus::Registry& r, size_t instances);
  void AddStateGauges(prometheus::Registry& r);
  void AddCapacityGauges(prometheus::Registry& r, const std::vector<const Backend*>& instances,
                         const Clock& clock);
  void AddCostGauges(prometheus::Registry& r);

  const ModelConfig* config_ = nullptr;
  const Scheduler* scheduler_ = nullptr;
  std::function<bool()> ready_;
  int accelerators_held_ = 0;
  std::vector<int64_t> bucket_lengths_;

  prometheus::Histogram* latency_ = nullptr;
  prometheus::Histogram* queue_wait_ = nullptr;
  prometheus::Histogram* batch_size_ = nullptr;
  prometheus::Histogram* request_length_ = nullptr;
  std::vector<prometheus::Histogram*> compute_by_bucket_;
  std::vector<prometheus::Counter*> batches_by_bucket_;
  prometheus::Counter* requests_[kNumOutcomes] = {};
  prometheus::Counter* inferences_ = nullptr;
  prometheus::Counter* real_samples_ = nullptr;
  prometheus::Counter* computed_samples_ = nullptr;
  prometheus::Counter* ok_samples_ = nullptr;
  prometheus::Counter* audio_seconds_ = nullptr;
  std::vector<prometheus::Counter*> busy_seconds_;  // per instance
  std::vector<prometheus::Gauge*> busy_ratio_;
  std::vector<prometheus::Counter*> execution_timeouts_;  // per instance
  prometheus::Gauge* queue_depth_ = nullptr;
  prometheus::Gauge* in_flight_ = nullptr;
  prometheus::Gauge* model_ready_ = nullptr;
  prometheus::Gauge* in_rotation_ = nullptr;
  prometheus::Gauge* padding_efficiency_ = nullptr;
  std::unique_ptr<CapacityEstimator> capacity_;
  prometheus::Gauge* capacity_utilization_ = nullptr;
  prometheus::Gauge* capacity_max_rps_ = nullptr;
  prometheus::Gauge* cost_usd_ = nullptr;
  prometheus::Gauge* audio_seconds_per_dollar_ = nullptr;
  // Added on the first successful inference: before it, "$ per 1k inferences" has no value (0 would read as free).
  // Set by whichever Render sees it first (family Add returns the same series for the same labels).
  prometheus::Family<prometheus::Gauge>* dollars_per_1k_family_ = nullptr;
  std::atomic<prometheus::Gauge*> dollars_per_1k_{nullptr};
  prometheus::Gauge* tokens_per_dollar_ = nullptr;
};

class ServerMetrics {
 public:
  // `start` is when the server process started (cost accrues from then); `cost` is optional.
  ServerMetrics(absl::Time start, std::optional<CostConfig> cost);
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // REQUIRES: before serving. `config`, `instances`, `scheduler` and `clock` must outlive this object;
  // `instances` give the per-bucket load/warm times (and the capacity estimate's first costs); the scheduler's
  // queue depth and in-flight count become gauges; `ready` tells whether the model serves; `clock` times the
  // capacity estimate's arrival window (the scheduler's clock).
  ModelMetrics* AddModel(const ModelConfig& config, const std::vector<const Backend*>& instances,
                         const Scheduler* scheduler, std::function<bool()> ready, const Clock& clock);
  // A generation model (its own series: server/llm/generation_metrics.h) costs too: with `cost:`, its
  // sluice_cost_usd and its share of sluice_server_cost_usd. REQUIRES: before serving; `config` outlives this.
  void AddGenerationModelCost(const ModelConfig& config);

  // sluice_model_memory_bytes{model, kind=weights|cache|graphs}: what the model's instances hold as loaded
  // (shared weights counted once; graph format 1 has its weights inside `graphs`). REQUIRES: before serving.
  void SetModelMemory(const std::string& model, const ModelMemory& memory);

  // The text exposition format, gauges refreshed as of `now`.
  std::string Render(absl::Time now);

  // For other components' series (the voice API's): the registry, a hook run at every Render before
  // serialising (REQUIRES: added before serving), and what a model's accelerators have cost so far (0 without
  // `cost:`; the same share as sluice_cost_usd).
  prometheus::Registry& registry() { return *registry_; }
  void AddRenderHook(std::function<void(absl::Time now)> hook) { render_hooks_.push_back(std::move(hook)); }
  double ModelDollarsSoFar(const ModelConfig& config, absl::Time now) const;

 private:
  const absl::Time start_;
  std::optional<CostMeter> cost_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::vector<std::unique_ptr<ModelMetrics>> models_;
  std::vector<std::function<void(absl::Time)>> render_hooks_;
  prometheus::Family<prometheus::Gauge>* model_memory_ = nullptr;
  prometheus::Gauge* resident_bytes_ = nullptr;
  prometheus::Gauge* peak_resident_bytes_ = nullptr;
  prometheus::Gauge* cpu_seconds_ = nullptr;
  prometheus::Gauge* uptime_seconds_ = nullptr;
  prometheus::Gauge* server_cost_usd_ = nullptr;
  struct GenerationCost {
    int accelerators_held;
    prometheus::Gauge* cost_usd;
  };
  std::vector<GenerationCost> generation_costs_;
};

}  // namespace sluice
