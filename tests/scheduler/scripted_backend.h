// A Backend for scheduler tests: records every batch it runs, can be held (to keep an instance busy) or told
// to fail, advances the FakeClock by a fixed compute time, and answers with the sim device's outputs
// (every element of row r's real part equals row r's real length).
#pragma once

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "backend/sim_backend.h"
#include "scheduler/clock.h"

namespace sluice::testing {

struct ExecutedBatch {
  int batch_size;
  int64_t length;
  std::vector<int64_t> row_lengths;
  absl::Time started;
};

class ScriptedBackend final : public Backend {
 public:
  ScriptedBackend(const ModelConfig& model, FakeClock* clock, absl::Duration compute)
      : clock_(clock), compute_(compute) {
    sim_ = *CreateSimBackend({&model, model.instances.front()}, [](absl::Duration) {});
  }

  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    {
      absl::MutexLock lock(&mu_);
      executed_.push_back({batch.batch_size, batch.length, batch.row_lengths, clock_ ? clock_->Now() : absl::Now()});
      mu_.Await(absl::Condition(+[](bool* held) { return !*held; }, &held_));
      if (fail_next_) {
        fail_next_ = false;
        return absl::InternalError("scripted backend failure");
      }
    }
    if (clock_) clock_->Advance(compute_);
    return sim_->Execute(batch);
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return sim_->load_stats(); }
  std::string Describe() const override { return "scripted"; }

  void Hold() {
    absl::MutexLock lock(&mu_);
    held_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    held_ = false;
  }
  void FailNext() {
    absl::MutexLock lock(&mu_);
    fail_next_ = true;
  }
  std::vector<ExecutedBatch> executed() const {
    absl::MutexLock lock(&mu_);
    return executed_;
  }
  size_t executed_count() const {
    absl::MutexLock lock(&mu_);
    return executed_.size();
  }

 private:
  FakeClock* clock_;
  const absl::Duration compute_;
  std::unique_ptr<Backend> sim_;
  mutable absl::Mutex mu_;
  bool held_ ABSL_GUARDED_BY(mu_) = false;
  bool fail_next_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<ExecutedBatch> executed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::testing
