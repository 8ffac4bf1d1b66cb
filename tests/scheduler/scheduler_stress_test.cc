// Many client threads against the real-clock DynamicBatcher on the sim device: random lengths, deadlines,
// priorities and cancellations. Every accepted request must be answered exactly once, with its own row.
// Also built with ThreadSanitizer (tests/sanitizers/), where it is the race detector's workload.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "backend/sim_backend.h"
#include "scheduler/dynamic_batcher.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace sluice {
namespace {

TEST(SchedulerStressTest, EveryAcceptedRequestIsAnsweredOnceWithItsOwnRow) {
  ModelConfig model = testing::SmallSimModel();
  model.batching.max_queue_size = 64;
  model.batching.max_queue_delay_ms = 0.5;
  model.sim = SimCostModel{0.2, 0.001, 1.0};
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> raw;
  for (int i = 0; i < 2; ++i) {
    backends.push_back(*CreateSimBackend({&model, model.instances.front(), i}));
    raw.push_back(backends.back().get());
  }
  auto scheduler = CreateDynamicBatcher({&model, raw});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();

  constexpr int kThreads = 4;
  constexpr int kPerThread = 250;
  std::atomic<int> accepted{0}, answered{0}, wrong{0}, double_answers{0}, retries{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::uniform_int_distribution<int64_t> length(1, 400);
      std::uniform_int_distribution<int> dice(0, 9);
      for (int i = 0; i < kPerThread; ++i) {
        const int64_t len = length(rng);
        auto calls = std::make_shared<std::atomic<int>>(0);
        InferRequest request;
        request.inputs.push_back(HostTensor::Zeros(DataType::kFp32, {len}));
        request.length = len;
        request.priority = dice(rng) % 4;
        if (dice(rng) == 0) request.deadline = absl::Now() + absl::Microseconds(300);
        request.on_done = [&, len, calls](InferResponse response) {
          if (calls->fetch_add(1) > 0) ++double_answers;
          ++answered;
          if (response.status.ok() &&
              (response.outputs[0].shape[0] != len || response.outputs[0].values<float>()[0] != len)) {
            ++wrong;
          }
        };
        absl::StatusOr<RequestId> id = (*scheduler)->Enqueue(request);
        while (id.status().code() == absl::StatusCode::kResourceExhausted) {  // queue full: back off, retry
          ++retries;
          absl::SleepFor(absl::Microseconds(200));
          id = (*scheduler)->Enqueue(request);
        }
        if (!id.ok()) continue;  // deadline already passed: rejected, never answered
        ++accepted;
        if (dice(rng) == 1) (*scheduler)->Cancel(*id);
      }
    });
  }
  for (auto& c : clients) c.join();
  (*scheduler)->Stop();
  EXPECT_GT(accepted.load(), kThreads * kPerThread / 2);
  EXPECT_EQ(answered.load(), accepted.load());
  EXPECT_EQ(double_answers.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ((*scheduler)->InFlight(), 0);
  std::printf("stress: %d accepted, %d queue-full retries\n", accepted.load(), retries.load());
}

}  // namespace
}  // namespace sluice
