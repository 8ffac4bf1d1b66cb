// One served model: its config, its Scheduler, its statistics and metrics, and the one entry point every front
// end calls — ServedModel::Infer: draining check, parameter parsing, output selection, input validation (once),
// refusal accounting, submission of the rows, exactly-once completion.
// Thread-safety: Infer, stats() and scheduler() may be used from any thread concurrently; the object is
// immutable after Create.
#pragma once

#include <atomic>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "scheduler/clock.h"
#include "scheduler/scheduler.h"
#include "backend/base/sync.h"
#include "server/core/infer_call.h"
#include "server/metrics/model_stats.h"
#include "server/core/pending_inference.h"
#include "server/core/serving_state.h"
#include "server/metrics/server_metrics.h"

namespace sluice {

struct ServedModelOptions {
  const ModelConfig* config = nullptr;  // must outlive the model
  std::vector<Backend*> instances;      // not owned; must outlive the model
  const ServingState* state = nullptr;  // must outlive the model
  ServerMetrics* metrics = nullptr;     // optional: Prometheus metrics for this model
  Clock* clock = &Clock::Real();
};

class ServedModel {
 public:
  // Creates the model's scheduler (the dynamic batcher) and registers its metrics, every batch reported to them.
  static absl::StatusOr<std::unique_ptr<ServedModel>> Create(const ServedModelOptions& options);
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;
  ~ServedModel();

  const ModelConfig& config() const { return *config_; }
  Scheduler& scheduler() { return *scheduler_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  ModelStats& stats() { return stats_; }
  // Serving: the server is ready (not loading or draining) and some instance is still in rotation.
  bool ready() const { return state_->ready() && scheduler_->InstancesInRotation() > 0; }

  // The one request path. `call` is what the front end decoded, or why its wire message could not be decoded.
  // `done` is called exactly once (see InferCompletion for which thread). Refusals before queueing (a decode
  // error; draining: Unavailable, unless call.continues_admitted; bad parameters, unknown outputs, invalid inputs: InvalidArgument; queue full:
  // ResourceExhausted) are counted in the statistics and metrics here, once, whatever the front end.
  // The handle withdraws the call's queued rows (client gone); it is empty when the call was refused.
  InferHandle Infer(absl::StatusOr<InferCall> call, InferCompletion done);

 private:
  explicit ServedModel(const ServedModelOptions& options);
  // The call's rows and options, or the refusal.
  absl::StatusOr<std::shared_ptr<PendingInference>> Prepare(InferCall& call, InferCompletion& done,
                                                            ValidatedRequest& validated);
  void RecordRefused(const absl::Status& status);

  const ModelConfig* const config_;
  const ServingState* const state_;
  Clock* const clock_;  // the scheduler's: `timeout` deadlines are measured on the clock that expires them
  std::unique_ptr<Scheduler> scheduler_;
  ModelStats stats_;
  ModelMetrics* metrics_ = nullptr;  // set in Create, before any request or batch
};

}  // namespace sluice
