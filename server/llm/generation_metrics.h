// One text-generation model's Prometheus series (labels: model; steps also step=prefill|decode):
//   sluice_generation_requests_total{model,outcome}        answered and refused calls (outcome as for requests)
//   sluice_generation_time_to_first_token_seconds{model,prefix_cache}   accepted -> first token produced;
//                                                          prefix_cache=hit (part of the prompt came from the
//                                                          prefix cache) or miss (all of it prefilled)
//   sluice_generation_inter_token_latency_seconds{model}    between consecutive tokens of one sequence
//   sluice_generation_e2e_latency_seconds{model}            accepted -> finished
//   sluice_generation_queue_time_seconds{model}             accepted -> its prefill started
//   sluice_generation_prompt_length_tokens{model}           prompt tokens per call (histogram)
//   sluice_generation_output_length_tokens{model}           generated tokens per call (histogram)
//   sluice_generation_prompt_tokens_total{model}, sluice_generation_output_tokens_total{model}
//   sluice_generation_step_seconds{model,step}              one prefill graph / one decode step
//   sluice_generation_decode_rows_total{model}, sluice_generation_decode_padded_rows_total{model}
//   sluice_execution_timeouts_total{model,instance}        calls past generation.execution_timeout_ms
//   sluice_instances_in_rotation{model}                     instances still given sequences (a hung call or a
//                                                          gone device takes its instance out)
//   sluice_generation_running{model}, sluice_generation_waiting{model}, sluice_generation_kv_slots_in_use{model},
//   sluice_generation_kv_slots{model}                      live engine state, read at every /metrics render
//   sluice_generation_prompt_tokens_per_dollar{model}, sluice_generation_output_tokens_per_dollar{model}
//                                                          tokens so far / the model's accelerator cost so far
//                                                          (present when the server config has `cost:`)
//   sluice_generation_prefix_cache_lookups_total{model}, sluice_generation_prefix_cache_hits_total{model},
//   sluice_generation_prefix_cache_hit_blocks_total{model}, sluice_generation_prefix_cache_evictions_total{model},
//   sluice_generation_prefix_cache_blocks_used{model}, sluice_generation_prefix_cache_blocks_free{model}
//                                                          prefix caching (generation.prefix_cache_block_size),
//                                                          read from the engine at every /metrics render
// Thread-safety: every method may be called from any thread (prometheus-cpp series are thread-safe). The engine
// pointer is set once before serving (AttachEngine) and only read after.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "backend/base/sync.h"
#include "scheduler/continuous_batcher.h"
#include "server/metrics/server_metrics.h"

namespace sluice {

class GenerationMetrics {
 public:
  // Registers the model's series in `metrics`' registry and a render hook that refreshes the gauges.
  // REQUIRES: before serving; `config` and `metrics` outlive this object.
  GenerationMetrics(const ModelConfig& config, ServerMetrics* metrics);
  GenerationMetrics(const GenerationMetrics&) = delete;
  GenerationMetrics& operator=(const GenerationMetrics&) = delete;

  // REQUIRES: before serving; `engine` outlives this object.
  void AttachEngine(const ContinuousBatcher* engine) { engine_ = engine; }

  void RecordRefused(const absl::Status& status);
  void RecordFirstToken(absl::Duration since_accepted, bool prefix_hit);
  void RecordInterToken(absl::Duration gap);
  void RecordFinished(const absl::Status& status, absl::Duration e2e, absl::Duration queue_time, int prompt_tokens,
                      int output_tokens);
  void RecordStep(const GenerationStepReport& step);

 private:
  void Refresh(absl::Time now);

  const ModelConfig& config_;
  ServerMetrics* const metrics_;
  const ContinuousBatcher* engine_ = nullptr;
  prometheus::Counter* requests_[kNumOutcomes] = {};
  prometheus::Family<prometheus::Counter>* execution_timeouts_ = nullptr;  // Add() is thread-safe
  prometheus::Histogram* ttft_miss_ = nullptr;
  prometheus::Histogram* ttft_hit_ = nullptr;
  // The engine's prefix cache counters, advanced by their growth at each render (under prefix_mu_: renders may
  // run concurrently).
  Mutex prefix_mu_;
  PrefixCacheCounters prefix_seen_ ABSL_GUARDED_BY(prefix_mu_);
  prometheus::Counter* prefix_lookups_ = nullptr;
  prometheus::Counter* prefix_hits_ = nullptr;
  prometheus::Counter* prefix_hit_blocks_ = nullptr;
  prometheus::Counter* prefix_evictions_ = nullptr;
  prometheus::Gauge* prefix_blocks_used_ = nullptr;
  prometheus::Gauge* prefix_blocks_free_ = nullptr;
  prometheus::Histogram* itl_ = nullptr;
  prometheus::Histogram* e2e_ = nullptr;
  prometheus::Histogram* queue_time_ = nullptr;
  prometheus::Histogram* prompt_length_ = nullptr;
  prometheus::Histogram* output_length_ = nullptr;
  prometheus::Counter* prompt_tokens_ = nullptr;
  prometheus::Counter* output_tokens_ = nullptr;
  prometheus::Histogram* prefill_seconds_ = nullptr;
  prometheus::Histogram* decode_seconds_ = nullptr;
  prometheus::Counter* decode_rows_ = nullptr;
  prometheus::Counter* decode_padded_rows_ = nullptr;
  prometheus::Gauge* running_ = nullptr;
  prometheus::Gauge* waiting_ = nullptr;
  prometheus::Gauge* slots_in_use_ = nullptr;
  prometheus::Gauge* slots_ = nullptr;
  prometheus::Gauge* in_rotation_ = nullptr;
  prometheus::Gauge* prompt_per_dollar_ = nullptr;
  prometheus::Gauge* output_per_dollar_ = nullptr;
};

}  // namespace sluice
