// Helpers for scheduler tests: a small sim speech model, requests whose answers can be awaited, and a
// real-time poll for conditions that another thread makes true.
#pragma once

#include <functional>
#include <memory>

#include "absl/time/clock.h"
#include "backend/base/model_config.h"
#include "scheduler/infer_request.h"
#include "scheduler/scheduler.h"
#include "backend/base/sync.h"

namespace sluice::testing {

// Buckets 100/200/400 x batch 1/2/4; 10 ms max delay, always waited; queue of 8; priorities 1..3, default 2.
inline ModelConfig SmallSimModel() {
  ModelConfig model;
  model.name = "sim_speech";
  model.kind = ModelKind::kSpeech;
  model.inputs = {{"audio", DataType::kFp32, {kVariableDim}, 16000}};
  model.outputs = {{"frames", DataType::kFp32, {kVariableDim, 2}, std::nullopt}};
  model.buckets = {{100, 200, 400}, {1, 2, 4}};
  model.batching = {10.0, 8, 3, 2};
  model.batching.skip_futile_delay = false;  // these tests time the delay itself; the rule has its own tests
  model.batching.await_returns = false;      // likewise
  model.batching.max_fill_wait_ms = 0;       // likewise (oldest first)
  model.instances = {{1, DeviceKind::kSim}};
  model.sim = SimCostModel{0, 0, 1.0};
  return model;
}

// A one-shot event on the scheduler's own primitives (visible to ThreadSanitizer, unlike absl::Notification
// from Debian's uninstrumented absl).
class Event {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
    cv_.SignalAll();
  }
  bool HasBeenNotified() {
    MutexLock lock(&mu_);
    return notified_;
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) {
    const absl::Time give_up = absl::Now() + timeout;
    MutexLock lock(&mu_);
    while (!notified_ && absl::Now() < give_up) cv_.WaitUntil(&mu_, give_up);
    return notified_;
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

struct PendingAnswer {
  Event done;
  InferResponse response;
};

inline InferRequest AudioRequest(int64_t length, std::shared_ptr<PendingAnswer> answer,
                                 absl::Time deadline = absl::InfiniteFuture(), int priority = 0) {
  InferRequest request;
  request.inputs.push_back(HostTensor::Zeros(DataType::kFp32, {length}));
  request.length = length;
  request.deadline = deadline;
  request.priority = priority;
  request.on_done = [answer](InferResponse response) {
    answer->response = std::move(response);
    answer->done.Notify();
  };
  return request;
}

// Enqueues a request; the returned answer is notified when on_done runs.
inline std::shared_ptr<PendingAnswer> Submit(Scheduler& scheduler, int64_t length,
                                             absl::Time deadline = absl::InfiniteFuture(), int priority = 0,
                                             RequestId* id = nullptr) {
  auto answer = std::make_shared<PendingAnswer>();
  absl::StatusOr<RequestId> accepted = scheduler.Enqueue(AudioRequest(length, answer, deadline, priority));
  EXPECT_TRUE(accepted.ok()) << accepted.status();
  if (accepted.ok() && id != nullptr) *id = *accepted;
  return answer;
}

// Polls `condition` in real time (other threads make it true). False on timeout.
inline bool Eventually(const std::function<bool()>& condition, absl::Duration timeout = absl::Seconds(10)) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    if (condition()) return true;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return condition();
}

// Lets the scheduler's threads run for a moment of real time (used before asserting that nothing happened;
// decisions depend only on the fake clock, so this cannot make a test pass by luck).
inline void LetThreadsRun() { absl::SleepFor(absl::Milliseconds(30)); }

}  // namespace sluice::testing
