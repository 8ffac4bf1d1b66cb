// The models a server process serves, each with its Scheduler and statistics, plus the server's readiness.
// Front ends look models up here and submit validated, possibly multi-row requests: each row becomes one
// scheduler request; the rows' answers are stacked back into one batched answer.
// Thread-safety: ModelHub is immutable after setup except the atomic ready/draining flags; ServedModel and
// PendingInference may be used from any thread. Lock order: PendingInference::mu_ is never held while calling
// the scheduler or a completion.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/scheduler.h"
#include "server/model_stats.h"
#include "server/server_metrics.h"
#include "server/request_validator.h"

namespace sluice {

// Called exactly once, from a scheduler thread: the stacked outputs ([rows, ...] per declared output) or the
// first row's error.
using InferCompletion = std::function<void(absl::StatusOr<std::vector<HostTensor>>)>;

struct SubmitOptions {
  absl::Time deadline = absl::InfiniteFuture();
  int priority = 0;
};

// The rows of one submitted request while they are in flight.
class PendingInference {
 public:
  // `metrics` may be null. `length` is the request's real length (for the length histogram and audio seconds).
  PendingInference(Scheduler* scheduler, ModelStats* stats, ModelMetrics* metrics, int64_t rows, int64_t length,
                   InferCompletion done);
  PendingInference(const PendingInference&) = delete;
  PendingInference& operator=(const PendingInference&) = delete;

  // Removes still-queued rows (they answer CANCELLED); rows already running finish normally.
  void Cancel();

 private:
  friend class ServedModel;
  void Accepted(RequestId id);
  void RowDone(int64_t row, InferResponse response);
  void RowsRefused(int64_t count, absl::Status status);
  // REQUIRES: mu_ held; releases it (the completion runs unlocked).
  void FinishAndUnlock() ABSL_UNLOCK_FUNCTION(mu_);

  Scheduler* const scheduler_;
  ModelStats* const stats_;
  ModelMetrics* const metrics_;
  const int64_t rows_;
  const int64_t length_;
  const absl::Time start_;
  absl::Mutex mu_;
  std::vector<RequestId> ids_ ABSL_GUARDED_BY(mu_);
  int64_t remaining_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<HostTensor>> outputs_ ABSL_GUARDED_BY(mu_);
  InferCompletion done_ ABSL_GUARDED_BY(mu_);
};

class ServedModel {
 public:
  ServedModel(const ModelConfig* config, std::unique_ptr<Scheduler> scheduler, double load_seconds);
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  const ModelConfig& config() const { return *config_; }
  Scheduler& scheduler() { return *scheduler_; }
  ModelStats& stats() { return stats_; }
  double load_seconds() const { return load_seconds_; }
  // REQUIRES: before serving. Null (the default) records no Prometheus metrics.
  void SetMetrics(ModelMetrics* metrics) { metrics_ = metrics; }
  // A request refused before reaching the scheduler (bad input, unknown output, bad parameters).
  void RecordRefused(const absl::Status& status);

  // Error: refused now, `done` is never called. OK: `done` is called exactly once from a scheduler thread.
  absl::StatusOr<std::shared_ptr<PendingInference>> Submit(ValidatedRequest request, const SubmitOptions& options,
                                                           InferCompletion done);

 private:
  const ModelConfig* const config_;
  std::unique_ptr<Scheduler> scheduler_;
  ModelStats stats_;
  ModelMetrics* metrics_ = nullptr;
  const double load_seconds_;
};

class ModelHub {
 public:
  ModelHub() = default;
  ModelHub(const ModelHub&) = delete;
  ModelHub& operator=(const ModelHub&) = delete;

  // REQUIRES: before any front end starts.
  void Add(std::unique_ptr<ServedModel> model) { models_.push_back(std::move(model)); }
  const std::vector<std::unique_ptr<ServedModel>>& models() const { return models_; }

  // NotFound naming the model (or version: sluice serves version "1" of each model; "" means it too).
  absl::StatusOr<ServedModel*> Find(std::string_view name, std::string_view version) const;

  // Ready: every model loaded and warmed, and not draining. Draining refuses new inference (Unavailable).
  bool ready() const { return ready_.load() && !draining_.load(); }
  bool draining() const { return draining_.load(); }
  void SetReady() { ready_ = true; }
  void BeginDrain() { draining_ = true; }
  // REQUIRES: before any front end starts. Null: /metrics answers 404.
  void SetMetrics(ServerMetrics* metrics) { metrics_ = metrics; }
  ServerMetrics* metrics() const { return metrics_; }
  int64_t InFlight() const;
  // Stops every scheduler (each finishes its accepted requests). REQUIRES: BeginDrain() was called.
  void StopAll();

 private:
  std::vector<std::unique_ptr<ServedModel>> models_;
  ServerMetrics* metrics_ = nullptr;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
};

}  // namespace sluice
