// The rows of one accepted ServedModel::Infer call while they are in flight: each row is one scheduler request;
// when the last row answers, the rows' outputs are stacked ([rows, ...]), the requested ones picked, and the
// completion called exactly once. InferHandle is what a front end keeps to withdraw the call (client gone).
// Thread-safety: every method may be called from any thread. Lock order: mu_ is never held while calling the
// scheduler, the metrics or the completion.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "backend/base/sync.h"
#include "scheduler/scheduler.h"
#include "server/core/infer_call.h"
#include "server/metrics/model_stats.h"
#include "server/metrics/server_metrics.h"

namespace sluice {

class PendingInference : public std::enable_shared_from_this<PendingInference> {
 public:
  struct Target {
    Scheduler* scheduler = nullptr;
    ModelStats* stats = nullptr;
    ModelMetrics* metrics = nullptr;  // may be null
  };
  // `selected`: the requested outputs' specs and their indices among the model's outputs.
  PendingInference(Target target, int64_t rows, int64_t length, std::vector<InferOutput> selected,
                   std::vector<size_t> selected_index, InferOptions options, InferCompletion done);
  PendingInference(const PendingInference&) = delete;
  PendingInference& operator=(const PendingInference&) = delete;

  // Submits every row. When the scheduler refuses the first row, the call is refused as a whole (counted as a
  // refusal, answered at once on this thread); a later refused row makes the call answer with that error once the
  // rows already queued have been withdrawn (they answer CANCELLED) or have finished.
  // REQUIRES: called once, right after construction through std::make_shared.
  void SubmitRows(std::vector<std::vector<HostTensor>> row_inputs, int64_t length);
  // Removes still-queued rows (they answer CANCELLED); rows already running finish normally.
  void Cancel();

 private:
  void Accepted(RequestId id);
  void RowDone(int64_t row, InferResponse response);
  void RowsRefused(int64_t count, absl::Status status);
  void RefuseWhole(const absl::Status& status);
  // REQUIRES: mu_ held; releases it (the completion runs unlocked).
  void FinishAndUnlock() ABSL_UNLOCK_FUNCTION(mu_);
  absl::StatusOr<InferResult> Assemble(std::vector<std::vector<HostTensor>> rows) const;

  const Target target_;
  const int64_t rows_;
  const int64_t length_;
  const std::vector<InferOutput> selected_;  // spec only; tensors filled by Assemble
  const std::vector<size_t> selected_index_;
  const InferOptions options_;
  const absl::Time start_;
  sluice::Mutex mu_;
  std::vector<RequestId> ids_ ABSL_GUARDED_BY(mu_);
  int64_t remaining_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<HostTensor>> outputs_ ABSL_GUARDED_BY(mu_);
  InferCompletion done_ ABSL_GUARDED_BY(mu_);
};

// A front end's hold on an accepted call; empty (Cancel does nothing) when the call was refused.
class InferHandle {
 public:
  InferHandle() = default;
  explicit InferHandle(std::shared_ptr<PendingInference> pending) : pending_(std::move(pending)) {}
  void Cancel() const {
    if (pending_) pending_->Cancel();
  }

 private:
  std::shared_ptr<PendingInference> pending_;
};

}  // namespace sluice
