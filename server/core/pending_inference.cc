#include "server/core/pending_inference.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sluice {
namespace {

// Stacks per-row outputs ([row][declared output]) into batched tensors [rows, ...]. Rows must agree in shape.
absl::StatusOr<std::vector<HostTensor>> StackRows(std::vector<std::vector<HostTensor>> rows) {
  std::vector<HostTensor> stacked;
  if (rows.empty()) return stacked;
  for (size_t o = 0; o < rows[0].size(); ++o) {
    HostTensor out{rows[0][o].dtype, rows[0][o].shape, {}};
    out.shape.insert(out.shape.begin(), static_cast<int64_t>(rows.size()));
    out.bytes.reserve(rows[0][o].bytes.size() * rows.size());
    for (auto& row : rows) {
      if (row.size() != rows[0].size() || row[o].shape != rows[0][o].shape) {
        return absl::InternalError(absl::StrCat("rows of one request produced different output shapes: ",
                                                ShapeToString(rows[0][o].shape), " and ",
                                                ShapeToString(row[o].shape)));
      }
      out.bytes.insert(out.bytes.end(), row[o].bytes.begin(), row[o].bytes.end());
    }
    stacked.push_back(std::move(out));
  }
  return stacked;
}

}  // namespace

PendingInference::PendingInference(Target target, int64_t rows, int64_t length, std::vector<InferOutput> selected,
                                   std::vector<size_t> selected_index, InferOptions options, InferCompletion done)
    : target_(target), rows_(rows), length_(length), selected_(std::move(selected)),
      selected_index_(std::move(selected_index)), options_(options), start_(absl::Now()), remaining_(rows),
      outputs_(rows), done_(std::move(done)) {}

void PendingInference::SubmitRows(std::vector<std::vector<HostTensor>> row_inputs, int64_t length) {
  for (int64_t row = 0; row < rows_; ++row) {
    InferRequest infer;
    infer.inputs = std::move(row_inputs[row]);
    infer.length = length;
    infer.deadline = options_.deadline;
    infer.priority = options_.priority;
    // Each row's callback holds the call alive until the row answers.
    infer.on_done = [self = shared_from_this(), row](InferResponse response) {
      self->RowDone(row, std::move(response));
    };
    absl::StatusOr<RequestId> id = target_.scheduler->Enqueue(std::move(infer));
    if (!id.ok() && row == 0) return RefuseWhole(id.status());
    if (!id.ok()) {
      // Rows already in are withdrawn; the call answers with this error once they are back.
      RowsRefused(rows_ - row, id.status());
      Cancel();
      return;
    }
    Accepted(*id);
  }
}

void PendingInference::RefuseWhole(const absl::Status& status) {
  target_.stats->RecordRejected(absl::ZeroDuration());
  if (target_.metrics != nullptr) target_.metrics->RecordRequest(status, absl::ZeroDuration(), 1, 0);
  InferCompletion done;
  {
    sluice::MutexLock lock(&mu_);
    done = std::move(done_);  // nothing was accepted: no row can finish the call
    done_ = nullptr;
  }
  done(status);
}

void PendingInference::Cancel() {
  std::vector<RequestId> ids;
  {
    sluice::MutexLock lock(&mu_);
    ids = ids_;
  }
  for (RequestId id : ids) target_.scheduler->Cancel(id);  // may answer rows synchronously: no lock held here
}

void PendingInference::Accepted(RequestId id) {
  sluice::MutexLock lock(&mu_);
  ids_.push_back(id);
}

void PendingInference::RowDone(int64_t row, InferResponse response) {
  target_.stats->RecordRow(response, absl::Now() - start_);
  if (target_.metrics != nullptr && response.batch_size > 0) target_.metrics->RecordRow(response);  // it ran
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
  if (target_.metrics != nullptr) target_.metrics->RecordRequest(status, absl::Now() - start_, rows_, length_);
  if (!status.ok()) {
    done(status);
  } else {
    done(Assemble(std::move(outputs)));
  }
}

absl::StatusOr<InferResult> PendingInference::Assemble(std::vector<std::vector<HostTensor>> rows) const {
  absl::StatusOr<std::vector<HostTensor>> stacked = StackRows(std::move(rows));
  if (!stacked.ok()) return stacked.status();
  InferResult result;
  result.options = options_;
  for (size_t i = 0; i < selected_.size(); ++i) {
    result.outputs.push_back({selected_[i].spec, std::move((*stacked)[selected_index_[i]])});
  }
  return result;
}

}  // namespace sluice
