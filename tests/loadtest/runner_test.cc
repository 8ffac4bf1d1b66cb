// Unit tests of RunLoad against a fake client (no server): what a closed and an open loop send, which requests
// count as measured, and the open loop's drops once max_outstanding calls are in flight.
#include "loadtest/core/runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <vector>

#include "backend/base/sync.h"

namespace sluice::loadtest {
namespace {

// Answers every call OK: at once (inline, on the sending thread), or, when `hold` is set, only once the run
// waits for the calls in flight (WaitIdle), as a server that answers nothing before the sending ends.
class FakeLoadClient final : public LoadClient {
 public:
  explicit FakeLoadClient(bool hold) : hold_(hold) {}

  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override {
    if (!hold_) {
      done(Outcome());
      return;
    }
    MutexLock lock(&mu_);
    held_.push_back(std::move(done));
  }
  void CancelAll() override {}
  bool WaitIdle(absl::Duration timeout) override {
    std::vector<OutcomeDone> held;
    {
      MutexLock lock(&mu_);
      held.swap(held_);
    }
    for (OutcomeDone& done : held) done(Outcome());
    return true;
  }
  int64_t in_flight() const override {
    MutexLock lock(&mu_);
    return static_cast<int64_t>(held_.size());
  }

 private:
  const bool hold_;
  mutable Mutex mu_;
  std::vector<OutcomeDone> held_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<Workload> TextWorkload() {
  ModelInfo info;
  info.name = "text_embed";
  info.kind = "text";
  info.input_name = "input_ids";
  info.datatype = "INT64";
  info.max_length = 64;
  std::vector<WorkloadModel> models;
  models.push_back({info, 1.0, *LengthProfile::Create("uniform:1-64", 0, 64), nullptr});
  return *Workload::Create(std::move(models), 1);
}

int64_t Measured(const RunResult& run) {
  int64_t n = 0;
  for (const RequestRecord& r : run.records) n += r.measured ? 1 : 0;
  return n;
}

TEST(RunLoadTest, ClosedLoopSendsWarmUpThenTheMeasuredCountAndStops) {
  std::unique_ptr<Workload> workload = TextWorkload();
  FakeLoadClient client(/*hold=*/false);
  RunOptions options;
  options.concurrency = 4;
  options.requests = 50;
  options.warmup_requests = 10;
  options.progress = false;
  int measure_starts = 0;
  options.on_measure_start = [&] { ++measure_starts; };
  absl::StatusOr<RunResult> run = RunLoad(options, *workload, client);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->stop_reason, "requests");
  EXPECT_FALSE(run->capped);
  ASSERT_EQ(run->records.size(), 60u);
  EXPECT_EQ(Measured(*run), 50);
  EXPECT_EQ(measure_starts, 1);
  std::set<uint64_t> indices;
  for (const RequestRecord& r : run->records) {
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r.measured, r.index >= 10) << r.index;
    indices.insert(r.index);
  }
  EXPECT_EQ(indices.size(), 60u);  // each index once
}

TEST(RunLoadTest, OpenLoopDropsArrivalsOnceMaxOutstandingCallsAreInFlight) {
  std::unique_ptr<Workload> workload = TextWorkload();
  FakeLoadClient client(/*hold=*/true);
  RunOptions options;
  options.rate = 2000;
  options.arrival = ArrivalKind::kConstant;
  options.requests = 20;
  options.max_outstanding = 3;
  options.progress = false;
  absl::StatusOr<RunResult> run = RunLoad(options, *workload, client);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->stop_reason, "requests");
  ASSERT_EQ(run->records.size(), 20u);
  int ok = 0, dropped = 0;
  for (const RequestRecord& r : run->records) {
    if (r.ok()) ++ok;
    if (r.code == -1) ++dropped;
  }
  EXPECT_EQ(ok, 3);
  EXPECT_EQ(dropped, 17);
  EXPECT_EQ(Measured(*run), 20);
}

TEST(RunLoadTest, RejectsBothOrNeitherLoopKind) {
  std::unique_ptr<Workload> workload = TextWorkload();
  FakeLoadClient client(/*hold=*/false);
  RunOptions options;
  EXPECT_FALSE(RunLoad(options, *workload, client).ok());
  options.concurrency = 1;
  options.rate = 1;
  EXPECT_FALSE(RunLoad(options, *workload, client).ok());
}

}  // namespace
}  // namespace sluice::loadtest
