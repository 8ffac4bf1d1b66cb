#include "server/model_hub.h"


#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sluice {

PendingInference::PendingInference(Scheduler* scheduler, ModelStats* stats, ModelMetrics* metrics, int64_t rows,
                                   int64_t length, InferCompletion done)
    : scheduler_(scheduler), stats_(stats), metrics_(metrics), rows_(rows), length_(length), start_(absl::Now()),
      remaining_(rows), outputs_(rows), done_(std::move(done)) {}

void PendingInference::Cancel() {
  std::vector<RequestId> ids;
  {
    absl::MutexLock lock(&mu_);
    ids = ids_;
  }
  for (RequestId id : ids) scheduler_->Cancel(id);  // may answer rows synchronously: no lock held here
}

void PendingInference::Accepted(RequestId id) {
  absl::MutexLock lock(&mu_);
  ids_.push_back(id);
}

void PendingInference::RowDone(int64_t row, InferResponse response) {
  stats_->RecordRow(response, absl::Now() - start_);
  if (metrics_ != nullptr && response.batch_size > 0) metrics_->RecordRow(response);  // it ran: it waited
  mu_.Lock();
  if (!response.status.ok()) {
    if (status_.ok()) status_ = response.status;
  } else {
    outputs_[row] = std::move(response.outputs);
  }
  --remaining_;
  FinishAndUnlock();
}

void PendingInference::RowsRefused(int64_t count, absl::Status status) {
  mu_.Lock();
  if (status_.ok()) status_ = std::move(status);
  remaining_ -= count;
  FinishAndUnlock();
}

void PendingInference::FinishAndUnlock() {
  if (remaining_ > 0 || !done_) {
    mu_.Unlock();
    return;
  }
  InferCompletion done = std::move(done_);
  done_ = nullptr;
  absl::Status status = status_;
  std::vector<std::vector<HostTensor>> outputs = std::move(outputs_);
  mu_.Unlock();
  if (metrics_ != nullptr) metrics_->RecordRequest(status, absl::Now() - start_, rows_, length_);
  if (!status.ok()) {
    done(status);
  } else {
    done(StackRows(std::move(outputs)));
  }
}

ServedModel::ServedModel(const ModelConfig* config, std::unique_ptr<Scheduler> scheduler, double load_seconds)
    : config_(config), scheduler_(std::move(scheduler)), load_seconds_(load_seconds) {}

absl::StatusOr<std::shared_ptr<PendingInference>> ServedModel::Submit(ValidatedRequest request,
                                                                      const SubmitOptions& options,
                                                                      InferCompletion done) {
  auto pending = std::make_shared<PendingInference>(scheduler_.get(), &stats_, metrics_, request.rows,
                                                    request.length, std::move(done));
  for (int64_t row = 0; row < request.rows; ++row) {
    InferRequest infer;
    infer.inputs = std::move(request.row_inputs[row]);
    infer.length = request.length;
    infer.deadline = options.deadline;
    infer.priority = options.priority;
    infer.on_done = [pending, row](InferResponse response) { pending->RowDone(row, std::move(response)); };
    absl::StatusOr<RequestId> id = scheduler_->Enqueue(std::move(infer));
    if (!id.ok()) {
      if (row == 0) {
        RecordRefused(id.status());
        return id.status();
      }
      // Some rows are in: withdraw them; the request answers with this error once they are back.
      pending->RowsRefused(request.rows - row, id.status());
      pending->Cancel();
      break;
    }
    pending->Accepted(*id);
  }
  return pending;
}

void ServedModel::RecordRefused(const absl::Status& status) {
  stats_.RecordRejected(absl::ZeroDuration());
  if (metrics_ != nullptr) metrics_->RecordRequest(status, absl::ZeroDuration(), 1, 0);
}

absl::StatusOr<ServedModel*> ModelHub::Find(std::string_view name_view, std::string_view version_view) const {
  const std::string name(name_view), version(version_view);
  for (const auto& model : models_) {
    if (model->config().name != name) continue;
    if (!version.empty() && version != "1") {
      return absl::NotFoundError(
          absl::StrCat("model '", name, "' has no version '", version, "' (sluice serves version 1)"));
    }
    return model.get();
  }
  return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
}

int64_t ModelHub::InFlight() const {
  int64_t total = 0;
  for (const auto& model : models_) total += model->scheduler().InFlight();
  return total;
}

void ModelHub::StopAll() {
  for (const auto& model : models_) model->scheduler().Stop();
}

}  // namespace sluice
