// A Backend for scheduler tests: records every batch it runs, can be held (to keep an instance busy) or told
// to fail, advances the FakeClock by a fixed compute time, and answers with the sim device's outputs
// (every element of row r's real part equals row r's real length).
#pragma once

#include <map>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "backend/sim_backend.h"
#include "scheduler/clock.h"
#include "backend/base/sync.h"
#include "tests/scheduler/holdable_backend.h"

namespace sluice::testing {

struct ExecutedBatch {
  int batch_size;
  int64_t length;
  std::vector<int64_t> row_lengths;
  absl::Time started;
  std::thread::id thread;  // the instance thread that ran it
};

class ScriptedBackend final : public HoldableBackend {
 public:
  ScriptedBackend(const ModelConfig& model, FakeClock* clock, absl::Duration compute)
      : clock_(clock), compute_(compute) {
    sim_ = *CreateSimBackend({&model, model.instances.front()}, [](absl::Duration) {});
  }

  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    {
      MutexLock lock(&mu_);
      executed_.push_back({batch.batch_size, batch.length, batch.row_lengths, clock_ ? clock_->Now() : absl::Now(),
                           std::this_thread::get_id()});
      WaitWhileHeld();
      if (fail_next_) {
        fail_next_ = false;
        return absl::InternalError("scripted backend failure");
      }
      if (gone_) return absl::UnavailableError("scripted device gone");
      if (throw_next_) {
        throw_next_ = false;
        throw std::runtime_error("scripted backend exception");
      }
    }
    if (clock_) clock_->Advance(ComputeFor(batch.batch_size));
    return sim_->Execute(batch);
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return sim_->load_stats(); }
  std::string Describe() const override {
    MutexLock lock(&mu_);
    if (describe_waits_while_held_) WaitWhileHeld();
    return "scripted";
  }
  // From now on Describe() waits while the backend is held, as a driver whose status query queues behind a stuck
  // call: a scheduler that describes a hung instance when it needs to would block until the hang ends.
  void MakeDescribeWaitWhileHeld() {
    MutexLock lock(&mu_);
    describe_waits_while_held_ = true;
  }

  // Makes batches of this compiled size take `compute` instead of the default.
  void SetComputeForBatchSize(int batch_size, absl::Duration compute) {
    MutexLock lock(&mu_);
    compute_by_size_[batch_size] = compute;
  }
  void FailNext() {
    MutexLock lock(&mu_);
    fail_next_ = true;
  }
  // Every later batch fails Unavailable, as a device that disappeared.
  void GoAway() {
    MutexLock lock(&mu_);
    gone_ = true;
  }
  void ThrowNext() {
    MutexLock lock(&mu_);
    throw_next_ = true;
  }
  std::vector<ExecutedBatch> executed() const {
    MutexLock lock(&mu_);
    return executed_;
  }
  size_t executed_count() const {
    MutexLock lock(&mu_);
    return executed_.size();
  }

 private:
  FakeClock* clock_;
  const absl::Duration compute_;
  absl::Duration ComputeFor(int batch_size) {
    MutexLock lock(&mu_);
    auto it = compute_by_size_.find(batch_size);
    return it == compute_by_size_.end() ? compute_ : it->second;
  }

  std::unique_ptr<Backend> sim_;
  std::map<int, absl::Duration> compute_by_size_ ABSL_GUARDED_BY(mu_);
  bool fail_next_ ABSL_GUARDED_BY(mu_) = false;
  bool throw_next_ ABSL_GUARDED_BY(mu_) = false;
  bool gone_ ABSL_GUARDED_BY(mu_) = false;
  bool describe_waits_while_held_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ExecutedBatch> executed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::testing
