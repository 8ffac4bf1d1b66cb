// Many client threads against a real-clock ContinuousBatcher with two fake-decoder instances: random prompt
// lengths, max_tokens, deadlines and cancellations (of waiting, running and finished sequences). Every accepted
// sequence must be answered exactly once, and every sequence that finished normally must carry exactly its
// single-sequence greedy tokens (any other must carry a prefix of them). Also built with
// ThreadSanitizer (tests/sanitizers/), where it is the race detector's workload for the generation engine.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "scheduler/continuous_batcher.h"
#include "tests/scheduler/fake_generation_backend.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace sluice {
namespace {

struct Tracked {
  Mutex mu;
  std::vector<int32_t> tokens ABSL_GUARDED_BY(mu);
  std::atomic<int> done_calls{0};
};

TEST(ContinuousBatcherStressTest, EveryAcceptedSequenceIsAnsweredOnceWithItsOwnTokens) {
  ModelConfig model;
  model.name = "fake_llm";
  model.kind = ModelKind::kGeneration;
  GenerationOptions gen;
  gen.vocab_size = 64;
  gen.context_length = 64;
  gen.kv_cache = {4, 1, 1, 4};
  gen.prefill_lengths = {8, 16, 32};
  gen.decode_batch_sizes = {1, 2, 4};
  gen.kv_lengths = {16, 32, 64};
  gen.eos_token_id = 2;
  gen.max_num_seqs = 4;
  gen.prefill_token_budget = 32;
  gen.max_queue_size = 16;
  model.generation = gen;
  testing::FakeDecoder decoder;
  std::vector<std::unique_ptr<testing::FakeGenerationBackend>> backends;
  std::vector<GenerationBackend*> raw;
  for (int i = 0; i < 2; ++i) {
    backends.push_back(std::make_unique<testing::FakeGenerationBackend>(gen, decoder, nullptr, absl::Microseconds(40),
                                                                     absl::Microseconds(20)));
    raw.push_back(backends.back().get());
  }
  ContinuousBatcherOptions options;
  options.model = &model;
  options.instances = raw;
  auto batcher = ContinuousBatcher::Create(options);
  ASSERT_TRUE(batcher.ok()) << batcher.status();

  constexpr int kThreads = 4;
  constexpr int kPerThread = 60;
  std::atomic<int> accepted{0}, answered{0}, wrong{0}, double_answers{0}, retries{0}, completed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < kThreads; ++t) {
    clients.emplace_back([&, t] {
      std::mt19937 rng(100 + t);
      std::uniform_int_distribution<int> length(1, 32), max_tokens(1, 24), token(3, 63), dice(0, 9);
      std::vector<SequenceId> ids;
      for (int i = 0; i < kPerThread; ++i) {
        auto tracked = std::make_shared<Tracked>();
        GenerationRequest request;
        const int n = length(rng);
        for (int k = 0; k < n; ++k) request.prompt.push_back(token(rng));
        request.max_tokens = max_tokens(rng);
        if (dice(rng) == 0) request.deadline = absl::Now() + absl::Microseconds(dice(rng) * 200);
        const std::vector<int32_t> expected = decoder.Greedy(request.prompt, request.max_tokens);
        request.on_token = [tracked](const GeneratedToken& g) {
          MutexLock lock(&tracked->mu);
          tracked->tokens.push_back(g.id);
          return true;
        };
        request.on_done = [&, tracked, expected](GenerationResult result) {
          if (tracked->done_calls.fetch_add(1) > 0) ++double_answers;
          ++answered;
          MutexLock lock(&tracked->mu);
          const bool prefix = tracked->tokens.size() <= expected.size() &&
                              std::equal(tracked->tokens.begin(), tracked->tokens.end(), expected.begin());
          if (!prefix || static_cast<int>(tracked->tokens.size()) != result.output_tokens) ++wrong;
          if (result.status.ok()) {
            ++completed;
            if (tracked->tokens != expected || result.finish != FinishReason::kLength) ++wrong;
          }
        };
        absl::StatusOr<SequenceId> id = (*batcher)->Enqueue(request);
        while (id.status().code() == absl::StatusCode::kResourceExhausted) {  // queue full: back off, retry
          ++retries;
          absl::SleepFor(absl::Microseconds(200));
          id = (*batcher)->Enqueue(request);
        }
        if (!id.ok()) continue;  // deadline already passed: refused, never answered
        ++accepted;
        ids.push_back(*id);
        if (dice(rng) == 1) (*batcher)->Cancel(*id);                     // most likely still waiting
        if (dice(rng) == 2) (*batcher)->Cancel(ids[rng() % ids.size()]);  // maybe running, maybe finished
      }
    });
  }
  for (auto& c : clients) c.join();
  (*batcher)->Stop();
  EXPECT_GT(accepted.load(), kThreads * kPerThread / 2);
  EXPECT_EQ(answered.load(), accepted.load());
  EXPECT_EQ(double_answers.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(completed.load(), accepted.load() / 2);
  EXPECT_EQ((*batcher)->Waiting(), 0);
  EXPECT_EQ((*batcher)->Running(), 0);
  for (auto& b : backends) EXPECT_TRUE(b->violations().empty()) << b->violations().front();
  std::printf("generation stress: %d accepted, %d completed, %d queue-full retries\n", accepted.load(),
              completed.load(), retries.load());
}

}  // namespace
}  // namespace sluice
