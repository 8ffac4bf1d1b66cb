#include "server/metrics/server_metrics.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"
#include "server/metrics/process_stats.h"

namespace sluice {
namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;

const prometheus::Histogram::BucketBoundaries kSecondsBuckets = {
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30};

template <typename T>
std::vector<double> AsBoundaries(const std::vector<T>& values) {
  return std::vector<double>(values.begin(), values.end());
}

}  // namespace

std::vector<double> RequestLengthBoundaries(const std::vector<int64_t>& compiled_lengths) {
  constexpr double kRatio = 1.05;
  constexpr int kMaxGeometric = 200;
  if (compiled_lengths.empty()) return {};
  const double largest = static_cast<double>(compiled_lengths.back());
  const double ratio = std::max(kRatio, std::pow(largest, 1.0 / (kMaxGeometric - 1)));
  std::set<int64_t> boundaries(compiled_lengths.begin(), compiled_lengths.end());
  int k = 0;
  for (double x = 1; x < largest && k < kMaxGeometric; x *= ratio, ++k) {
    boundaries.insert(static_cast<int64_t>(std::ceil(x - 1e-9)));
  }
  return std::vector<double>(boundaries.begin(), boundaries.end());
}

const char* OutcomeName(RequestOutcome outcome) {
  static constexpr const char* kNames[kNumOutcomes] = {"ok",       "invalid",   "rejected",
                                                       "timeout",  "cancelled", "backend_error"};
  return kNames[static_cast<int>(outcome)];
}

RequestOutcome OutcomeFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk: return RequestOutcome::kOk;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnauthenticated: return RequestOutcome::kInvalid;
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kUnavailable: return RequestOutcome::kRejected;
    case absl::StatusCode::kDeadlineExceeded: return RequestOutcome::kTimeout;
    case absl::StatusCode::kCancelled: return RequestOutcome::kCancelled;
    default: return RequestOutcome::kBackendError;
  }
}

void ModelMetrics::RecordRequest(const absl::Status& status, absl::Duration latency, int64_t rows, int64_t length) {
  const RequestOutcome outcome = OutcomeFor(status);
  requests_[static_cast<int>(outcome)]->Increment();
  // Refused before queueing (length 0 here, or invalid input): counted, but no latency to record.
  if (outcome == RequestOutcome::kInvalid || length <= 0) return;
  latency_->Observe(absl::ToDoubleSeconds(latency));
  if (outcome != RequestOutcome::kOk) return;
  inferences_->Increment(static_cast<double>(rows));
  ok_samples_->Increment(static_cast<double>(rows * length));
  if (config_->kind == ModelKind::kSpeech) {
    audio_seconds_->Increment(static_cast<double>(rows * length) / *config_->inputs.front().sample_rate);
  }
}

void ModelMetrics::RecordArrival(int64_t rows, int64_t length) {
  request_length_->Observe(static_cast<double>(length));
  capacity_->RecordArrival(rows, length);
}

void ModelMetrics::RecordRow(const InferResponse& response) {
  queue_wait_->Observe(absl::ToDoubleSeconds(response.queue_time));
}

void ModelMetrics::RecordBatch(const BatchReport& report) {
  const size_t bucket = std::lower_bound(bucket_lengths_.begin(), bucket_lengths_.end(), report.bucket_length) -
                        bucket_lengths_.begin();
  const double compute = absl::ToDoubleSeconds(report.compute);
  if (report.timed_out) {  // it never finished: no compute or batch-size sample, but the instance was held
    execution_timeouts_[report.instance]->Increment();
    busy_seconds_[report.instance]->Increment(compute);
    return;
  }
  compute_by_bucket_[bucket]->Observe(compute);
  batches_by_bucket_[bucket]->Increment();
  batch_size_->Observe(report.batch_size);
  real_samples_->Increment(static_cast<double>(report.real_steps));
  computed_samples_->Increment(static_cast<double>(report.batch_size) * static_cast<double>(report.bucket_length));
  busy_seconds_[report.instance]->Increment(compute);
  if (report.ok) capacity_->RecordBatch(report.bucket_length, report.batch_size, report.compute);
}

void ModelMetrics::Refresh(absl::Time now, double elapsed_seconds, const CostMeter* cost) {
  if (scheduler_ != nullptr) {
    queue_depth_->Set(static_cast<double>(scheduler_->QueueDepth()));
    in_flight_->Set(static_cast<double>(scheduler_->InFlight()));
    in_rotation_->Set(static_cast<double>(scheduler_->InstancesInRotation()));
  }
  model_ready_->Set(ready_() ? 1 : 0);
  for (size_t i = 0; i < busy_seconds_.size(); ++i) {
    busy_ratio_[i]->Set(elapsed_seconds > 0 ? busy_seconds_[i]->Value() / elapsed_seconds : 0);
  }
  const double computed = computed_samples_->Value();
  padding_efficiency_->Set(computed > 0 ? real_samples_->Value() / computed : 0);
  const CapacityEstimate capacity = capacity_->Estimate();
  capacity_utilization_->Set(capacity.utilization);
  capacity_max_rps_->Set(capacity.max_requests_per_second);
  if (cost == nullptr) return;
  const double dollars = cost->DollarsSoFar(accelerators_held_, now);
  cost_usd_->Set(dollars);
  const double inferences = inferences_->Value();
  if (inferences > 0) {
    prometheus::Gauge* per_1k = dollars_per_1k_.load();
    if (per_1k == nullptr) {
      per_1k = &dollars_per_1k_family_->Add(Labels());
      dollars_per_1k_.store(per_1k);
    }
    per_1k->Set(dollars / (inferences / 1000.0));
  }
  if (audio_seconds_per_dollar_) audio_seconds_per_dollar_->Set(dollars > 0 ? audio_seconds_->Value() / dollars : 0);
  if (tokens_per_dollar_) tokens_per_dollar_->Set(dollars > 0 ? ok_samples_->Value() / dollars : 0);
}

ServerMetrics::ServerMetrics(absl::Time start, std::optional<CostConfig> cost)
    : start_(start), registry_(std::make_shared<prometheus::Registry>()) {
  if (cost) cost_.emplace(*cost, start);
  resident_bytes_ = &BuildGauge().Name("sluice_process_resident_memory_bytes").Help("Resident memory (VmRSS)")
                         .Register(*registry_).Add({});
  peak_resident_bytes_ = &BuildGauge().Name("sluice_process_peak_resident_memory_bytes")
                              .Help("Peak resident memory since start (VmHWM)").Register(*registry_).Add({});
  cpu_seconds_ = &BuildGauge().Name("sluice_process_cpu_seconds").Help("User + system CPU time since start")
                      .Register(*registry_).Add({});
  uptime_seconds_ = &BuildGauge().Name("sluice_uptime_seconds").Help("Seconds since the server process started")
                         .Register(*registry_).Add({});
  if (cost_) {
    server_cost_usd_ = &BuildGauge().Name("sluice_server_cost_usd")
                            .Help("USD spent so far on the accelerators all models hold, generation models included (hourly price x share x hours)")
                            .Register(*registry_).Add({{"preset", cost_->config().preset}});
  }
}

prometheus::Labels ModelMetrics::Labels() const { return {{"model", config_->name}}; }

prometheus::Labels ModelMetrics::LabelsWith(std::string key, std::string value) const {
  prometheus::Labels labels = Labels();
  labels[std::move(key)] = std::move(value);
  return labels;
}

// prometheus-cpp returns the existing family when a name is registered again, so each model adds its series.
void ModelMetrics::AddRequestHistograms(prometheus::Registry& r) {
  const prometheus::Labels model = Labels();
  latency_ = &BuildHistogram().Name("sluice_request_latency_seconds")
                  .Help("Request latency, arrival at the scheduler to answer (all rows)").Register(r)
                  .Add(model, kSecondsBuckets);
  queue_wait_ = &BuildHistogram().Name("sluice_queue_wait_seconds").Help("Time a row waited for its batch")
                     .Register(r).Add(model, kSecondsBuckets);
  batch_size_ = &BuildHistogram().Name("sluice_batch_size").Help("Compiled batch size of each executed batch")
                     .Register(r).Add(model, AsBoundaries(config_->buckets.batch_sizes));
  request_length_ = &BuildHistogram().Name("sluice_request_length")
                         .Help("Real length of each request offered to the scheduler, in the model's steps (samples "
                               "or tokens); boundaries ~5 % apart from 1 to the largest bucket, and every bucket")
                         .Register(r).Add(model, RequestLengthBoundaries(config_->buckets.lengths));
}

void ModelMetrics::AddBucketSeries(prometheus::Registry& r) {
  auto& compute = BuildHistogram().Name("sluice_batch_compute_seconds").Help("Graph execution time per batch")
                      .Register(r);
  auto& batches = BuildCounter().Name("sluice_batch_executions_total").Help("Executed batches").Register(r);
  for (int64_t length : config_->buckets.lengths) {
    compute_by_bucket_.push_back(&compute.Add(LabelsWith("bucket", std::to_string(length)), kSecondsBuckets));
    batches_by_bucket_.push_back(&batches.Add(LabelsWith("bucket", std::to_string(length))));
  }
}

void ModelMetrics::AddCounters(prometheus::Registry& r) {
  const prometheus::Labels model = Labels();
  auto& requests = BuildCounter().Name("sluice_requests_total").Help("Client requests by outcome").Register(r);
  for (int o = 0; o < kNumOutcomes; ++o) {
    requests_[o] = &requests.Add(LabelsWith("outcome", OutcomeName(static_cast<RequestOutcome>(o))));
  }
  inferences_ = &BuildCounter().Name("sluice_inferences_total").Help("Successful inferences (rows)")
                     .Register(r).Add(model);
  real_samples_ = &BuildCounter().Name("sluice_real_samples_total")
                       .Help("Real (unpadded) input steps executed: audio samples or tokens").Register(r).Add(model);
  computed_samples_ = &BuildCounter().Name("sluice_computed_samples_total")
                           .Help("Input steps computed: batch size x bucket length, padding and dummy rows included")
                           .Register(r).Add(model);
  ok_samples_ = &BuildCounter().Name("sluice_successful_samples_total")
                     .Help("Real input steps of successful requests: audio samples or tokens").Register(r).Add(model);
  audio_seconds_ = &BuildCounter().Name("sluice_audio_seconds_total")
                        .Help("Audio seconds of successful requests (speech models)").Register(r).Add(model);
}

void ModelMetrics::AddInstanceSeries(prometheus::Registry& r, size_t instances) {
  auto& busy = BuildCounter().Name("sluice_instance_busy_seconds_total").Help("Seconds each instance ran graphs")
                   .Register(r);
  auto& busy_ratio = BuildGauge().Name("sluice_instance_busy_ratio")
                         .Help("Busy seconds / seconds since start, per instance").Register(r);
  auto& timeouts = BuildCounter().Name("sluice_execution_timeouts_total")
                      .Help("Batches that ran past the model's execution_timeout_ms (the instance then leaves rotation)")
                      .Register(r);
  for (size_t i = 0; i < instances; ++i) {
    busy_seconds_.push_back(&busy.Add(LabelsWith("instance", std::to_string(i))));
    busy_ratio_.push_back(&busy_ratio.Add(LabelsWith("instance", std::to_string(i))));
    execution_timeouts_.push_back(&timeouts.Add(LabelsWith("instance", std::to_string(i))));
  }
}

void ModelMetrics::AddStateGauges(prometheus::Registry& r) {
  const prometheus::Labels model = Labels();
  queue_depth_ = &BuildGauge().Name("sluice_queue_depth").Help("Requests waiting in queues").Register(r).Add(model);
  in_flight_ = &BuildGauge().Name("sluice_in_flight").Help("Accepted requests not yet answered")
                    .Register(r).Add(model);
  model_ready_ = &BuildGauge().Name("sluice_model_ready").Help("1 when the model is loaded, warmed and serving")
                      .Register(r).Add(model);
  in_rotation_ = &BuildGauge().Name("sluice_instances_in_rotation")
                      .Help("Instances still given batches (one whose device failed Unavailable or whose batch hung is taken out)")
                      .Register(r).Add(model);
  padding_efficiency_ = &BuildGauge().Name("sluice_padding_efficiency")
                             .Help("real / computed input steps (1 = no padding waste)").Register(r).Add(model);
}

void ModelMetrics::AddCapacityGauges(prometheus::Registry& r, const std::vector<const Backend*>& instances,
                                     const Clock& clock) {
  const prometheus::Labels model = Labels();
  CapacityEstimatorOptions options;
  options.buckets = config_->buckets;
  options.instances = static_cast<int>(instances.size());
  options.warmup_seconds = CapacityEstimator::WarmupSeconds(*config_, instances);
  options.clock = &clock;
  capacity_ = std::make_unique<CapacityEstimator>(std::move(options));
  capacity_utilization_ = &BuildGauge().Name("sluice_capacity_utilization")
                               .Help("Share of the instances' time the last 60 s of arrivals need when batched as "
                                     "under full load (arrivals/s / sluice_capacity_max_requests_per_second)")
                               .Register(r).Add(model);
  capacity_max_rps_ = &BuildGauge().Name("sluice_capacity_max_requests_per_second")
                           .Help("Predicted saturation throughput for the last 60 s's length mix: instances / "
                                 "sum over buckets of share x compute per row at the most efficient batch size")
                           .Register(r).Add(model);
}

void ModelMetrics::AddCostGauges(prometheus::Registry& r) {
  const prometheus::Labels model = Labels();
  cost_usd_ = &BuildGauge().Name("sluice_cost_usd").Help("USD spent so far on the accelerators this model holds")
                   .Register(r).Add(model);
  dollars_per_1k_family_ = &BuildGauge().Name("sluice_dollars_per_1k_inferences")
                                .Help("sluice_cost_usd / (successful inferences / 1000); absent until the first one")
                                .Register(r);
  if (config_->kind == ModelKind::kSpeech) {
    audio_seconds_per_dollar_ =
        &BuildGauge().Name("sluice_audio_seconds_per_dollar")
             .Help("Model input audio seconds of successful requests (sluice_audio_seconds_total) / sluice_cost_usd: "
                   "every window the voice API sends counts whole, overlap and streaming left context included, so "
                   "this is the model's compute per dollar; the client's audio per dollar is "
                   "sluice_voice_audio_seconds_per_dollar")
             .Register(r).Add(model);
  }
  if (config_->kind == ModelKind::kText) {
    tokens_per_dollar_ = &BuildGauge().Name("sluice_tokens_per_dollar")
                              .Help("Tokens of successful requests / sluice_cost_usd").Register(r).Add(model);
  }
}

namespace {

// Per (bucket, batch size): the slowest instance's graph load and warm-up times (static gauges).
void SetBucketLoadGauges(prometheus::Registry& r, const ModelConfig& config,
                         const std::vector<const Backend*>& instances) {
  auto& load = BuildGauge().Name("sluice_bucket_load_seconds").Help("Graph load time per bucket (slowest instance)")
                   .Register(r);
  auto& warm = BuildGauge().Name("sluice_bucket_warm_seconds").Help("Warm-up time per bucket (slowest instance)")
                   .Register(r);
  for (const Backend* instance : instances) {
    for (const BucketLoadStats& s : instance->load_stats()) {
      const prometheus::Labels labels = {{"model", config.name},
                                         {"bucket", std::to_string(s.length)},
                                         {"batch_size", std::to_string(s.batch_size)}};
      prometheus::Gauge& l = load.Add(labels);
      prometheus::Gauge& w = warm.Add(labels);
      l.Set(std::max(l.Value(), s.load_seconds));
      w.Set(std::max(w.Value(), s.warm_seconds));
    }
  }
}

}  // namespace

ModelMetrics* ServerMetrics::AddModel(const ModelConfig& config, const std::vector<const Backend*>& instances,
                                      const Scheduler* scheduler, std::function<bool()> ready,
                                      const Clock& clock) {
  auto m = std::unique_ptr<ModelMetrics>(new ModelMetrics());
  m->config_ = &config;
  m->scheduler_ = scheduler;
  m->ready_ = std::move(ready);
  m->accelerators_held_ = AcceleratorsHeld(config);
  m->bucket_lengths_ = config.buckets.lengths;
  prometheus::Registry& r = *registry_;
  m->AddRequestHistograms(r);
  m->AddBucketSeries(r);
  m->AddCounters(r);
  m->AddInstanceSeries(r, instances.size());
  m->AddStateGauges(r);
  m->AddCapacityGauges(r, instances, clock);
  SetBucketLoadGauges(r, config, instances);
  if (cost_) m->AddCostGauges(r);
  models_.push_back(std::move(m));
  return models_.back().get();
}

void ServerMetrics::SetModelMemory(const std::string& model, const ModelMemory& memory) {
  if (model_memory_ == nullptr) {
    model_memory_ = &BuildGauge().Name("sluice_model_memory_bytes")
                         .Help("Bytes a model holds as loaded, by kind: weights (one copy per device), cache (KV), "
                               "graphs (graph files loaded)")
                         .Register(*registry_);
  }
  model_memory_->Add({{"model", model}, {"kind", "weights"}}).Set(static_cast<double>(memory.weight_bytes));
  model_memory_->Add({{"model", model}, {"kind", "cache"}}).Set(static_cast<double>(memory.cache_bytes));
  model_memory_->Add({{"model", model}, {"kind", "graphs"}}).Set(static_cast<double>(memory.graph_bytes));
}

void ServerMetrics::AddGenerationModelCost(const ModelConfig& config) {
  if (!cost_) return;
  prometheus::Gauge& gauge = BuildGauge().Name("sluice_cost_usd")
                                 .Help("USD spent so far on the accelerators this model holds")
                                 .Register(*registry_).Add({{"model", config.name}});
  generation_costs_.push_back({AcceleratorsHeld(config), &gauge});
}

double ServerMetrics::ModelDollarsSoFar(const ModelConfig& config, absl::Time now) const {
  return cost_ ? cost_->DollarsSoFar(AcceleratorsHeld(config), now) : 0.0;
}

std::string ServerMetrics::Render(absl::Time now) {
  const double elapsed = absl::ToDoubleSeconds(now - start_);
  double total_cost = 0;
  for (auto& m : models_) {
    m->Refresh(now, elapsed, cost_ ? &*cost_ : nullptr);
    if (cost_) total_cost += cost_->DollarsSoFar(m->accelerators_held_, now);
  }
  if (cost_) {
    for (const GenerationCost& model : generation_costs_) {
      const double dollars = cost_->DollarsSoFar(model.accelerators_held, now);
      model.cost_usd->Set(dollars);
      total_cost += dollars;
    }
  }
  if (server_cost_usd_) server_cost_usd_->Set(total_cost);
  const ProcessStats process = ReadProcessStats();
  resident_bytes_->Set(static_cast<double>(process.resident_bytes));
  peak_resident_bytes_->Set(static_cast<double>(process.peak_resident_bytes));
  cpu_seconds_->Set(process.cpu_seconds);
  uptime_seconds_->Set(elapsed);
  for (const auto& hook : render_hooks_) hook(now);
  return prometheus::TextSerializer().Serialize(registry_->Collect());
}

}  // namespace sluice
