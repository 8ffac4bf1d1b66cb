// Deterministic ContinuousBatcher tests: a FakeClock moves only by the fake backend's per-call cost (or by the
// test); FakeGenerationBackend checks every call against the compiled shapes and its per-slot cache, so a
// sequence's tokens equal the single-sequence reference only if the engine's slot and position bookkeeping is
// right. Hold()/Release() keep an instance inside a call while a test arranges the queue.
#include "scheduler/continuous_batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <thread>

#include "tests/scheduler/fake_generation_backend.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace sluice {
namespace {

using ::sluice::testing::BackendCall;
using ::sluice::testing::Eventually;
using ::sluice::testing::FakeDecoder;
using ::sluice::testing::FakeGenerationBackend;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// What came back for one sequence; filled on the engine thread, read by the test.
class Answer {
 public:
  bool OnToken(const GeneratedToken& token) {
    MutexLock lock(&mu_);
    tokens_.push_back(token.id);
    indices_.push_back(token.index);
    return stop_after_ < 0 || static_cast<int>(tokens_.size()) <= stop_after_;
  }
  void OnDone(GenerationResult result) {
    {
      MutexLock lock(&mu_);
      result_ = std::move(result);
      done_thread_ = std::this_thread::get_id();
      ++done_calls_;
    }
    done_.Notify();
  }
  // on_token returns false for the token with this index.
  void StopAfter(int index) {
    MutexLock lock(&mu_);
    stop_after_ = index;
  }
  bool Wait() { return done_.WaitForNotificationWithTimeout(absl::Seconds(20)); }
  bool done() { return done_.HasBeenNotified(); }
  std::vector<int32_t> tokens() const {
    MutexLock lock(&mu_);
    return tokens_;
  }
  std::vector<int> indices() const {
    MutexLock lock(&mu_);
    return indices_;
  }
  GenerationResult result() const {
    MutexLock lock(&mu_);
    return result_;
  }
  std::thread::id done_thread() const {
    MutexLock lock(&mu_);
    return done_thread_;
  }
  int done_calls() const {
    MutexLock lock(&mu_);
    return done_calls_;
  }

 private:
  mutable Mutex mu_;
  testing::Event done_;
  std::vector<int32_t> tokens_ ABSL_GUARDED_BY(mu_);
  std::vector<int> indices_ ABSL_GUARDED_BY(mu_);
  GenerationResult result_ ABSL_GUARDED_BY(mu_);
  std::thread::id done_thread_ ABSL_GUARDED_BY(mu_);
  int done_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int stop_after_ ABSL_GUARDED_BY(mu_) = -1;
};

// Vocabulary 64, context 64; prompt buckets 8/16/32, decode batches 1/2/4, KV lengths 16/32/64; 4 slots.
GenerationOptions SmallGeneration() {
  GenerationOptions gen;
  gen.vocab_size = 64;
  gen.context_length = 64;
  gen.kv_cache = {4, 1, 1, 4};
  gen.prefill_lengths = {8, 16, 32};
  gen.decode_batch_sizes = {1, 2, 4};
  gen.kv_lengths = {16, 32, 64};
  gen.bos_token_id = 1;
  gen.eos_token_id = 2;
  gen.max_num_seqs = 4;
  gen.prefill_token_budget = 32;
  gen.max_queue_size = 8;
  gen.default_max_tokens = 8;
  return gen;
}

// n tokens in [3, 64), different for each salt.
std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back(3 + (salt * 7 + i * 13 + salt * i) % 61);
  return prompt;
}

class ContinuousBatcherTest : public ::testing::Test {
 protected:
  ContinuousBatcherTest() {
    model_.name = "fake_llm";
    model_.kind = ModelKind::kGeneration;
    model_.generation = SmallGeneration();
  }
  GenerationOptions& gen() { return *model_.generation; }

  void Start(int instances = 1) {
    std::vector<GenerationBackend*> raw;
    for (int i = 0; i < instances; ++i) {
      backends_.push_back(std::make_unique<FakeGenerationBackend>(gen(), decoder_, &clock_));
      raw.push_back(backends_.back().get());
    }
    ContinuousBatcherOptions options;
    options.model = &model_;
    options.instances = raw;
    options.clock = &clock_;
    options.observer = [this](const GenerationStepReport& report) {
      MutexLock lock(&reports_mu_);
      reports_.push_back(report);
    };
    auto batcher = ContinuousBatcher::Create(options);
    ASSERT_TRUE(batcher.ok()) << batcher.status();
    batcher_ = std::move(*batcher);
  }
  void TearDown() override {
    for (auto& b : backends_) b->Release();
    if (batcher_) batcher_->Stop();
    for (auto& b : backends_) EXPECT_THAT(b->violations(), IsEmpty());
  }

  GenerationRequest Request(std::shared_ptr<Answer> answer, std::vector<int32_t> prompt, int max_tokens) {
    GenerationRequest request;
    request.prompt = std::move(prompt);
    request.max_tokens = max_tokens;
    request.on_token = [answer](const GeneratedToken& t) { return answer->OnToken(t); };
    request.on_done = [answer](GenerationResult r) { answer->OnDone(std::move(r)); };
    return request;
  }
  std::shared_ptr<Answer> Submit(GenerationRequest request, SequenceId* id = nullptr) {
    absl::StatusOr<SequenceId> accepted = batcher_->Enqueue(std::move(request));
    EXPECT_TRUE(accepted.ok()) << accepted.status() << " (waiting " << batcher_->Waiting() << ", running "
                               << batcher_->Running() << ", backend calls " << backends_[0]->call_count() << ")";
    if (accepted.ok() && id != nullptr) *id = *accepted;
    return last_answer_;
  }
  // The usual case: a greedy request, accepted.
  std::shared_ptr<Answer> Submit(std::vector<int32_t> prompt, int max_tokens, SequenceId* id = nullptr) {
    last_answer_ = std::make_shared<Answer>();
    return Submit(Request(last_answer_, std::move(prompt), max_tokens), id);
  }
  std::shared_ptr<Answer> NewAnswer() { return last_answer_ = std::make_shared<Answer>(); }

  FakeGenerationBackend& backend(int i = 0) { return *backends_[i]; }
  // Holds the backend and submits a sequence whose prefill then waits inside it (the instance is busy).
  std::shared_ptr<Answer> SubmitHeld(std::vector<int32_t> prompt, int max_tokens, int instance = 0) {
    backend(instance).Hold();
    auto answer = Submit(std::move(prompt), max_tokens);
    EXPECT_TRUE(Eventually([&] { return backend(instance).blocked() == 1; }));
    return answer;
  }
  std::vector<GenerationStepReport> reports() {
    MutexLock lock(&reports_mu_);
    return reports_;
  }
  static std::vector<BackendCall> Prefills(const std::vector<BackendCall>& calls) {
    std::vector<BackendCall> out;
    for (const BackendCall& c : calls) {
      if (c.prefill) out.push_back(c);
    }
    return out;
  }
  // "P<prompt length>" or "D<rows>" for each call, in order.
  static std::vector<std::string> Trace(const std::vector<BackendCall>& calls) {
    std::vector<std::string> out;
    for (const BackendCall& c : calls) {
      out.push_back(c.prefill ? absl::StrCat("P", c.prompt.size()) : absl::StrCat("D", c.rows.size()));
    }
    return out;
  }
  void ExpectReference(Answer& answer, const std::vector<int32_t>& prompt, int max_tokens) {
    const GenerationResult result = answer.result();
    EXPECT_TRUE(result.status.ok()) << result.status;
    EXPECT_EQ(result.finish, FinishReason::kLength) << FinishReasonName(result.finish);
    EXPECT_EQ(result.output_tokens, max_tokens);
    EXPECT_EQ(result.prompt_tokens, static_cast<int>(prompt.size()));
    EXPECT_EQ(answer.tokens(), decoder_.Greedy(prompt, max_tokens));
  }

  ModelConfig model_;
  FakeDecoder decoder_;
  FakeClock clock_;
  std::vector<std::unique_ptr<FakeGenerationBackend>> backends_;
  std::unique_ptr<ContinuousBatcher> batcher_;
  std::shared_ptr<Answer> last_answer_;
  Mutex reports_mu_;
  std::vector<GenerationStepReport> reports_ ABSL_GUARDED_BY(reports_mu_);
};

TEST_F(ContinuousBatcherTest, EverySequenceGetsItsSingleSequenceTokensWhenArrivalsInterleave) {
  gen().max_queue_size = 16;  // a slow test thread may find all ten waiting
  Start();
  const int lengths[] = {3, 17, 8, 30, 1, 12, 25, 5, 9, 16};
  const int max_tokens[] = {20, 5, 12, 9, 30, 7, 15, 3, 25, 11};
  std::vector<std::shared_ptr<Answer>> answers;
  auto submit = [&](int i) { answers.push_back(Submit(Prompt(lengths[i], i), max_tokens[i])); };
  for (int i = 0; i < 3; ++i) submit(i);
  ASSERT_TRUE(Eventually([&] { return backend().call_count() >= 6; }));
  for (int i = 3; i < 6; ++i) submit(i);
  ASSERT_TRUE(Eventually([&] { return backend().call_count() >= 20; }));
  backend().Hold();  // the last four wait together (behind whatever call is held)
  for (int i = 6; i < 10; ++i) submit(i);
  ASSERT_TRUE(Eventually([&] { return backend().blocked() == 1; }));
  backend().Release();
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(answers[i]->Wait());
    SCOPED_TRACE(i);
    ExpectReference(*answers[i], Prompt(lengths[i], i), max_tokens[i]);
    EXPECT_EQ(answers[i]->done_calls(), 1);
  }
  size_t widest = 0;
  for (const BackendCall& c : backend().calls()) widest = std::max(widest, c.rows.size());
  EXPECT_GE(widest, 2u) << "sequences never shared a decode step";
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0 && batcher_->Waiting() == 0; }));
}

TEST_F(ContinuousBatcherTest, FinishedSequenceFreesItsSlotForAWaitingOne) {
  gen().max_num_seqs = 2;
  Start();
  auto a = SubmitHeld(Prompt(4, 1), 3);
  auto b = Submit(Prompt(5, 2), 10);
  auto c = Submit(Prompt(6, 3), 5);
  EXPECT_EQ(batcher_->Waiting(), 2);
  backend().Release();
  for (auto& x : {a, b, c}) ASSERT_TRUE(x->Wait());
  ExpectReference(*a, Prompt(4, 1), 3);
  ExpectReference(*b, Prompt(5, 2), 10);
  ExpectReference(*c, Prompt(6, 3), 5);
  const std::vector<BackendCall> prefills = Prefills(backend().calls());
  ASSERT_EQ(prefills.size(), 3u);
  EXPECT_EQ(prefills[0].rows[0].slot, 0);
  EXPECT_EQ(prefills[1].rows[0].slot, 1);
  EXPECT_EQ(prefills[2].rows[0].slot, 0) << "c reuses a's slot";
  EXPECT_EQ(batcher_->TotalSlots(), 2);
  // c was admitted in the iteration after a's last token: a's third token came from the decode before it.
  const std::vector<std::string> trace = Trace(backend().calls());
  EXPECT_THAT(std::vector<std::string>(trace.begin(), trace.begin() + 6),
              ElementsAre("P4", "D1", "P5", "D2", "P6", "D2"));
  for (const GenerationStepReport& r : reports()) EXPECT_LE(r.rows, 2);
}

TEST_F(ContinuousBatcherTest, PrefillUsesTheSmallestPromptBucket) {
  Start();
  const int lengths[] = {5, 8, 9, 16, 17, 32};
  for (int i = 0; i < 6; ++i) {
    auto answer = Submit(Prompt(lengths[i], i), 1);
    ASSERT_TRUE(answer->Wait());
    ExpectReference(*answer, Prompt(lengths[i], i), 1);
  }
  std::vector<int64_t> buckets;
  for (const BackendCall& c : backend().calls()) buckets.push_back(c.prefill ? c.length : -1);
  EXPECT_THAT(buckets, ElementsAre(8, 8, 16, 16, 32, 32));  // max_tokens 1: no decode step
}

TEST_F(ContinuousBatcherTest, KvBucketGrowsWhenPositionsCrossABoundary) {
  Start();
  auto answer = Submit(Prompt(14, 1), 6);
  ASSERT_TRUE(answer->Wait());
  ExpectReference(*answer, Prompt(14, 1), 6);
  std::vector<std::pair<int64_t, int64_t>> steps;  // (position, KV length)
  for (const BackendCall& c : backend().calls()) {
    if (!c.prefill) steps.emplace_back(c.rows[0].position, c.length);
  }
  EXPECT_THAT(steps, ElementsAre(std::pair<int64_t, int64_t>{14, 16}, std::pair<int64_t, int64_t>{15, 16},
                                 std::pair<int64_t, int64_t>{16, 32}, std::pair<int64_t, int64_t>{17, 32},
                                 std::pair<int64_t, int64_t>{18, 32}));
}

TEST_F(ContinuousBatcherTest, DecodeBatchIsPaddedToTheSmallestBatchBucketAndReported) {
  Start();
  auto a = SubmitHeld(Prompt(3, 1), 4);
  auto b = Submit(Prompt(4, 2), 4);
  auto c = Submit(Prompt(5, 3), 4);
  backend().Release();
  for (auto& x : {a, b, c}) ASSERT_TRUE(x->Wait());
  ExpectReference(*b, Prompt(4, 2), 4);
  const std::vector<BackendCall> calls = backend().calls();
  EXPECT_THAT(Trace(calls), ElementsAre("P3", "D1", "P4", "P5", "D3", "D3", "D2"));
  EXPECT_EQ(calls[1].batch_size, 1);
  EXPECT_EQ(calls[4].batch_size, 4);
  EXPECT_EQ(calls[6].batch_size, 2);  // a finished: b and c go on at batch 2
  const std::vector<GenerationStepReport> r = reports();
  ASSERT_EQ(r.size(), 7u);
  EXPECT_TRUE(r[0].prefill);
  EXPECT_EQ(r[0].length, 8);
  EXPECT_EQ(r[0].real_tokens, 3);
  EXPECT_EQ(r[0].compute, absl::Milliseconds(5));
  EXPECT_FALSE(r[4].prefill);
  EXPECT_EQ(r[4].batch_size, 4);
  EXPECT_EQ(r[4].rows, 3);
  EXPECT_EQ(r[4].length, 16);
  EXPECT_EQ(r[4].real_tokens, 3);
  EXPECT_TRUE(r[4].ok);
}

TEST_F(ContinuousBatcherTest, MoreRunningThanTheLargestBatchRunsSeveralDecodeCalls) {
  gen().kv_cache.slots = 6;
  gen().max_num_seqs = 6;
  Start();
  std::vector<std::shared_ptr<Answer>> answers{SubmitHeld(Prompt(4, 0), 3)};
  for (int i = 1; i < 6; ++i) answers.push_back(Submit(Prompt(4, i), 3));
  backend().Release();
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(answers[i]->Wait());
    ExpectReference(*answers[i], Prompt(4, i), 3);
  }
  const std::vector<BackendCall> calls = backend().calls();
  // a's prefill and decode; five prefills; a finishes in the first call, the others in two chunks.
  EXPECT_THAT(Trace(calls), ElementsAre("P4", "D1", "P4", "P4", "P4", "P4", "P4", "D4", "D2", "D4", "D1"));
  EXPECT_EQ(calls[7].batch_size, 4);
  EXPECT_EQ(calls[8].batch_size, 2);
  EXPECT_EQ(calls[10].batch_size, 1);
}

TEST_F(ContinuousBatcherTest, PrefillBudgetDefersAPromptThatWouldExceedIt) {
  Start();  // budget 32
  auto x = SubmitHeld(Prompt(4, 0), 20);
  auto a = Submit(Prompt(20, 1), 3);
  auto b = Submit(Prompt(20, 2), 3);
  backend().Release();
  for (auto& s : {x, a, b}) ASSERT_TRUE(s->Wait());
  ExpectReference(*a, Prompt(20, 1), 3);
  ExpectReference(*b, Prompt(20, 2), 3);
  const std::vector<std::string> trace = Trace(backend().calls());
  EXPECT_THAT(std::vector<std::string>(trace.begin(), trace.begin() + 6),
              ElementsAre("P4", "D1", "P20", "D2", "P20", "D3"));
}

TEST_F(ContinuousBatcherTest, PromptOverTheBudgetIsAdmittedAloneWhenNothingElseWas) {
  gen().prefill_token_budget = 10;
  Start();
  auto x = SubmitHeld(Prompt(4, 0), 20);
  auto a = Submit(Prompt(20, 1), 3);
  auto b = Submit(Prompt(3, 2), 3);
  backend().Release();
  for (auto& s : {x, a, b}) ASSERT_TRUE(s->Wait());
  ExpectReference(*a, Prompt(20, 1), 3);
  const std::vector<std::string> trace = Trace(backend().calls());
  EXPECT_THAT(std::vector<std::string>(trace.begin(), trace.begin() + 6),
              ElementsAre("P4", "D1", "P20", "D2", "P3", "D3"));
}

TEST_F(ContinuousBatcherTest, EosFinishesWithStopUnlessIgnored) {
  decoder_.eos_at_history_length = 10;  // prompt 5: the sixth generated token is EOS
  Start();
  auto stopped = Submit(Prompt(5, 1), 20);
  ASSERT_TRUE(stopped->Wait());
  EXPECT_EQ(stopped->result().finish, FinishReason::kStop);
  EXPECT_TRUE(stopped->result().status.ok());
  EXPECT_EQ(stopped->result().output_tokens, 6);
  ASSERT_EQ(stopped->tokens().size(), 6u);
  EXPECT_EQ(stopped->tokens().back(), 2);
  EXPECT_THAT(stopped->indices(), ElementsAre(0, 1, 2, 3, 4, 5));

  GenerationRequest request = Request(NewAnswer(), Prompt(5, 1), 8);
  request.ignore_eos = true;
  auto ignored = Submit(std::move(request));
  ASSERT_TRUE(ignored->Wait());
  EXPECT_EQ(ignored->result().finish, FinishReason::kLength);
  EXPECT_EQ(ignored->tokens().size(), 8u);
  EXPECT_EQ(ignored->tokens()[5], 2);
}

TEST_F(ContinuousBatcherTest, AnyOfSeveralEosIdsFinishesWithStop) {
  decoder_.eos_at_history_length = 10;  // prompt 5: the sixth generated token is the decoder's "EOS" (id 2)
  // An eos_token_id list [other, 2] (Llama 3's several end ids): "other" is an id the first five tokens avoid.
  const std::vector<int32_t> before = decoder_.Greedy(Prompt(5, 1), 5);
  int other = 3;
  while (std::find(before.begin(), before.end(), other) != before.end()) ++other;
  gen().eos_token_id = other;
  gen().extra_eos_token_ids = {2};
  Start();
  auto stopped = Submit(Prompt(5, 1), 20);
  ASSERT_TRUE(stopped->Wait());
  EXPECT_EQ(stopped->result().finish, FinishReason::kStop);
  ASSERT_EQ(stopped->tokens().size(), 6u);
  EXPECT_EQ(stopped->tokens().back(), 2);
}

TEST_F(ContinuousBatcherTest, StopTokenIdFinishesWithStop) {
  Start();
  const std::vector<int32_t> reference = decoder_.Greedy(Prompt(6, 4), 20);
  size_t k = 2;  // the first token from index 2 on that did not occur before it
  while (std::find(reference.begin(), reference.begin() + k, reference[k]) != reference.begin() + k) ++k;
  GenerationRequest request = Request(NewAnswer(), Prompt(6, 4), 20);
  request.stop_token_ids = {reference[k]};
  auto answer = Submit(std::move(request));
  ASSERT_TRUE(answer->Wait());
  EXPECT_EQ(answer->result().finish, FinishReason::kStop);
  EXPECT_EQ(answer->tokens(), std::vector<int32_t>(reference.begin(), reference.begin() + k + 1));
}

// Greedy tokens after `prompt` with `suppressed` at -infinity at every step, `first` also at the first, and (when
// non-empty) only `allowed` ids possible: the engine's suppress rules, computed apart from it.
std::vector<int32_t> MaskedGreedy(const FakeDecoder& decoder, std::vector<int32_t> prompt, int max_tokens,
                                  const std::vector<int32_t>& suppressed, const std::vector<int32_t>& first,
                                  const std::vector<int32_t>& allowed) {
  std::vector<int32_t> out;
  for (int i = 0; i < max_tokens; ++i) {
    std::vector<float> logits = decoder.Logits(prompt);
    const float excluded = -std::numeric_limits<float>::infinity();
    if (!allowed.empty()) {
      for (int v = 0; v < decoder.vocab; ++v) {
        if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) logits[v] = excluded;
      }
    }
    for (int32_t id : suppressed) logits[id] = excluded;
    if (i == 0) {
      for (int32_t id : first) logits[id] = excluded;
    }
    out.push_back(Sampler::Greedy(logits));
    prompt.push_back(out.back());
  }
  return out;
}

TEST_F(ContinuousBatcherTest, SuppressedIdsAreNeverSampledAndFirstStepIdsOnlyAtTheFirst) {
  Start();
  const std::vector<int32_t> plain = decoder_.Greedy(Prompt(5, 3), 12);
  // Suppress the plain run's 2nd and 4th tokens everywhere, and its first token at the first step only.
  const std::vector<int32_t> suppressed = {plain[1], plain[3]}, first = {plain[0]};
  GenerationRequest request = Request(NewAnswer(), Prompt(5, 3), 12);
  request.suppressed_token_ids = suppressed;
  request.first_step_suppressed_ids = first;
  auto answer = Submit(std::move(request));
  auto other = Submit(Prompt(5, 3), 12);  // shares the steps, suppresses nothing
  ASSERT_TRUE(answer->Wait());
  ASSERT_TRUE(other->Wait());
  const std::vector<int32_t> want = MaskedGreedy(decoder_, Prompt(5, 3), 12, suppressed, first, {});
  EXPECT_EQ(answer->tokens(), want);
  EXPECT_NE(want, plain);
  EXPECT_NE(answer->tokens().front(), plain[0]);
  for (int32_t token : answer->tokens()) EXPECT_THAT(suppressed, ::testing::Not(::testing::Contains(token)));
  EXPECT_EQ(other->tokens(), plain);
}

TEST_F(ContinuousBatcherTest, AllowedIdsRestrictEveryStep) {
  Start();
  const std::vector<int32_t> allowed = {7, 11, 40};
  GenerationRequest request = Request(NewAnswer(), Prompt(4, 1), 6);
  request.allowed_token_ids = allowed;
  auto answer = Submit(std::move(request));
  ASSERT_TRUE(answer->Wait());
  EXPECT_EQ(answer->tokens(), MaskedGreedy(decoder_, Prompt(4, 1), 6, {}, {}, allowed));
  for (int32_t token : answer->tokens()) EXPECT_THAT(allowed, ::testing::Contains(token));
}

// Sampling on the device: every decode step with nothing masked offers each row's TokenPick, its uniform drawn
// from the sequence's generator before the step; a backend that picks only argmax rows (the TorchScript CPU
// backend) answers picked ids for all-greedy steps and logits for the rest, one that picks everything (a GPU)
// answers picked ids always. Either way the tokens are the ones the host would sample with the same seed.
TEST_F(ContinuousBatcherTest, DeviceAndHostPicksGiveTheSameTokensForTheSameSeed) {
  using DevicePicks = FakeGenerationBackend::DevicePicks;
  std::vector<std::vector<int32_t>> sampled_tokens;
  const DevicePicks modes[] = {DevicePicks::kNone, DevicePicks::kArgmax, DevicePicks::kAll};
  for (int run = 0; run < 3; ++run) {
    const DevicePicks mode = modes[run];
    SCOPED_TRACE(run);
    Start();
    FakeGenerationBackend& fake = backend(run);  // each Start() adds one
    fake.PickOnDevice(mode);
    fake.Hold();  // both prompts wait together, so their decode steps are shared
    auto greedy = Submit(Prompt(5, 1), 10);
    GenerationRequest sampled = Request(NewAnswer(), Prompt(9, 2), 6);
    sampled.sampling = {0.8f, 5, 0.9f, 7};
    auto other = Submit(std::move(sampled));
    ASSERT_TRUE(Eventually([&] { return fake.blocked() == 1; }));
    fake.Release();
    ASSERT_TRUE(greedy->Wait() && other->Wait());
    ExpectReference(*greedy, Prompt(5, 1), 10);
    sampled_tokens.push_back(other->tokens());

    int sampled_slot = -1;
    for (const BackendCall& c : Prefills(fake.calls())) {
      if (c.prompt == Prompt(9, 2)) sampled_slot = c.rows.front().slot;
    }
    ASSERT_GE(sampled_slot, 0);
    int shared = 0, greedy_only = 0;
    for (const BackendCall& c : fake.calls()) {
      if (c.prefill) continue;
      ASSERT_EQ(c.picks.size(), c.rows.size());
      bool holds_sampled = false;
      for (size_t r = 0; r < c.rows.size(); ++r) {
        const bool is_sampled = c.rows[r].slot == sampled_slot;
        holds_sampled = holds_sampled || is_sampled;
        EXPECT_EQ(c.picks[r].temperature, is_sampled ? 0.8f : 0.0f);
        if (is_sampled) EXPECT_EQ(c.picks[r].top_k, 5);
      }
      const bool picked = mode == DevicePicks::kAll || (mode == DevicePicks::kArgmax && !holds_sampled);
      EXPECT_EQ(c.answered_picked, picked) << c.rows.size() << " rows";
      if (holds_sampled && c.rows.size() == 2) ++shared;
      if (!holds_sampled) ++greedy_only;
    }
    EXPECT_GT(shared, 0) << "the two never shared a step";
    EXPECT_GT(greedy_only, 0);
    batcher_->Stop();
    batcher_.reset();
  }
  EXPECT_EQ(sampled_tokens[1], sampled_tokens[0]);
  EXPECT_EQ(sampled_tokens[2], sampled_tokens[0]);
  EXPECT_EQ(sampled_tokens[0].size(), 6u);
}

TEST_F(ContinuousBatcherTest, AMaskedGreedyRowAsksForLogitsAndIsMaskedOnTheHost) {
  Start();
  backend().PickOnDevice(FakeGenerationBackend::DevicePicks::kAll);
  const std::vector<int32_t> plain = decoder_.Greedy(Prompt(5, 3), 8);
  GenerationRequest request = Request(NewAnswer(), Prompt(5, 3), 8);
  request.suppressed_token_ids = {plain[1], plain[3]};
  auto answer = Submit(std::move(request));
  ASSERT_TRUE(answer->Wait());
  EXPECT_EQ(answer->tokens(), MaskedGreedy(decoder_, Prompt(5, 3), 8, {plain[1], plain[3]}, {}, {}));
  for (const BackendCall& c : backend().calls()) EXPECT_TRUE(c.picks.empty() && !c.answered_picked);
}

TEST_F(ContinuousBatcherTest, EnqueueRefusesOutOfVocabularySuppressedIdsAndAStrayEncoderOutput) {
  Start();
  GenerationRequest request = Request(NewAnswer(), Prompt(4, 1), 6);
  request.suppressed_token_ids = {decoder_.vocab};
  absl::StatusOr<SequenceId> refused = batcher_->Enqueue(std::move(request));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("outside the vocabulary"));
  request = Request(NewAnswer(), Prompt(4, 1), 6);
  request.encoder_output = std::make_shared<const std::vector<float>>(8, 0.0f);
  refused = batcher_->Enqueue(std::move(request));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("decoder-only"));
}

TEST_F(ContinuousBatcherTest, OnTokenReturningFalseFinishesWithStop) {
  Start();
  auto answer = NewAnswer();
  answer->StopAfter(2);
  Submit(Request(answer, Prompt(6, 5), 20));
  ASSERT_TRUE(answer->Wait());
  EXPECT_EQ(answer->result().finish, FinishReason::kStop);
  EXPECT_TRUE(answer->result().status.ok());
  EXPECT_EQ(answer->result().output_tokens, 3);
  EXPECT_EQ(answer->tokens().size(), 3u);
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0; }));
  // Prefill + two decode steps made the three tokens. Delivery runs on the instance's lane, at most a couple of
  // hand-overs behind the engine: the engine sees the stop after at most three more steps, whose tokens nobody got.
  EXPECT_GE(backend().call_count(), 3u);
  EXPECT_LE(backend().call_count(), 6u);
}

TEST_F(ContinuousBatcherTest, CallbacksRunOnOneDeliveryThreadPerInstanceNotTheEngineThread) {
  gen().max_num_seqs = 2;
  Start();
  std::vector<std::shared_ptr<Answer>> answers;
  for (int i = 0; i < 4; ++i) answers.push_back(Submit(Prompt(5, 10 + i), 6));
  for (auto& a : answers) ASSERT_TRUE(a->Wait());
  for (auto& a : answers) {
    EXPECT_EQ(a->done_thread(), answers[0]->done_thread());
    EXPECT_NE(a->done_thread(), std::this_thread::get_id());
    EXPECT_EQ(a->result().output_tokens, 6);
    EXPECT_THAT(a->indices(), ElementsAre(0, 1, 2, 3, 4, 5));  // in order, each once, then on_done
  }
  EXPECT_NE(answers[0]->done_thread(), backend().call_thread());
}

TEST_F(ContinuousBatcherTest, FullContextFinishesWithLengthAtTheLastKvBucket) {
  Start();
  auto answer = Submit(Prompt(30, 6), 34);  // 30 + 34 == context_length
  ASSERT_TRUE(answer->Wait());
  ExpectReference(*answer, Prompt(30, 6), 34);
  const std::vector<BackendCall> calls = backend().calls();
  ASSERT_EQ(calls.size(), 34u);
  EXPECT_EQ(calls.back().rows[0].position, 62);  // the last token is delivered, never fed
  EXPECT_EQ(calls.back().length, 64);
  EXPECT_EQ(calls[1].length, 32);
}

TEST_F(ContinuousBatcherTest, CancelledWaitingSequenceIsAnsweredOnTheCallersThreadAndNeverRuns) {
  gen().max_num_seqs = 1;
  Start();
  auto blocker = SubmitHeld(Prompt(4, 0), 5);
  SequenceId id = 0;
  auto waiting = Submit(Prompt(7, 1), 5, &id);
  batcher_->Cancel(id);
  ASSERT_TRUE(waiting->done());
  EXPECT_EQ(waiting->done_thread(), std::this_thread::get_id());
  EXPECT_EQ(waiting->result().status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(waiting->result().finish, FinishReason::kCancelled);
  EXPECT_EQ(waiting->result().output_tokens, 0);
  EXPECT_EQ(batcher_->Waiting(), 0);
  batcher_->Cancel(id);  // again: no effect
  backend().Release();
  ASSERT_TRUE(blocker->Wait());
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0; }));
  for (const BackendCall& c : Prefills(backend().calls())) EXPECT_EQ(c.prompt.size(), 4u);
  EXPECT_EQ(waiting->done_calls(), 1);
}

TEST_F(ContinuousBatcherTest, CancelledRunningSequenceEndsAtTheNextIterationAndFreesItsSlot) {
  Start();
  backend().HoldFromCall(4);
  SequenceId id = 0;
  auto running = Submit(Prompt(5, 1), 50, &id);
  ASSERT_TRUE(Eventually([&] { return backend().blocked() == 1; }));
  batcher_->Cancel(id);
  EXPECT_FALSE(running->done());
  backend().Release();
  ASSERT_TRUE(running->Wait());
  const GenerationResult result = running->result();
  EXPECT_EQ(result.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(result.finish, FinishReason::kCancelled);
  EXPECT_EQ(backend().call_count(), 4u);  // none after the held one
  EXPECT_EQ(running->tokens(), decoder_.Greedy(Prompt(5, 1), 4));  // the held call's token is delivered
  EXPECT_EQ(result.output_tokens, 4);
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0; }));
  auto next = Submit(Prompt(6, 2), 3);
  ASSERT_TRUE(next->Wait());
  ExpectReference(*next, Prompt(6, 2), 3);
  EXPECT_EQ(Prefills(backend().calls()).back().rows[0].slot, 0);
}

TEST_F(ContinuousBatcherTest, DeadlinePassingWhileWaitingAnswersDeadlineExceededWithoutRunning) {
  gen().max_num_seqs = 1;
  Start();
  auto blocker = SubmitHeld(Prompt(4, 0), 5);
  GenerationRequest request = Request(NewAnswer(), Prompt(9, 1), 5);
  request.deadline = clock_.Now() + absl::Milliseconds(10);
  auto late = Submit(std::move(request));
  clock_.Advance(absl::Milliseconds(20));
  backend().Release();
  ASSERT_TRUE(late->Wait());
  EXPECT_EQ(late->result().status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(late->result().finish, FinishReason::kDeadline);
  EXPECT_EQ(late->result().output_tokens, 0);
  EXPECT_GE(late->result().queue_time, absl::Milliseconds(20));
  ASSERT_TRUE(blocker->Wait());
  ExpectReference(*blocker, Prompt(4, 0), 5);
  for (const BackendCall& c : Prefills(backend().calls())) EXPECT_EQ(c.prompt.size(), 4u);
}

TEST_F(ContinuousBatcherTest, DeadlinePassingWhileRunningEndsTheSequenceAtTheNextIteration) {
  Start();  // every call costs 5 ms of fake time
  GenerationRequest request = Request(NewAnswer(), Prompt(5, 1), 30);
  request.deadline = clock_.Now() + absl::Milliseconds(22);
  auto answer = Submit(std::move(request));
  ASSERT_TRUE(answer->Wait());
  // Tokens at +5 (prefill), +10, +15, +20, +25 ms; the iteration starting at +25 ms ends it.
  EXPECT_EQ(answer->result().status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(answer->result().finish, FinishReason::kDeadline);
  EXPECT_EQ(answer->tokens(), decoder_.Greedy(Prompt(5, 1), 5));
  EXPECT_EQ(answer->result().output_tokens, 5);
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0; }));
}

TEST_F(ContinuousBatcherTest, FullQueueRefusesWithResourceExhausted) {
  gen().max_num_seqs = 1;
  gen().max_queue_size = 2;
  Start();
  SubmitHeld(Prompt(4, 0), 5);
  Submit(Prompt(4, 1), 5);
  Submit(Prompt(4, 2), 5);
  auto answer = NewAnswer();
  absl::StatusOr<SequenceId> refused = batcher_->Enqueue(Request(answer, Prompt(4, 3), 5));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("queue is full (max_queue_size 2)"));
}

TEST_F(ContinuousBatcherTest, EnqueueRefusesInvalidRequestsNamingTheValueAndTheLimit) {
  Start();
  struct Case {
    std::string name;
    std::function<void(GenerationRequest&)> edit;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"empty prompt", [](GenerationRequest& r) { r.prompt.clear(); }, "prompt is empty"},
      {"long prompt", [](GenerationRequest& r) { r.prompt = Prompt(33, 1); },
       "33 tokens, more than the longest prompt the model takes (32)"},
      {"max_tokens 0", [](GenerationRequest& r) { r.max_tokens = 0; }, "max_tokens is 0; it must be at least 1"},
      {"over context", [](GenerationRequest& r) { r.prompt = Prompt(30, 1), r.max_tokens = 35; },
       "(30 tokens) + max_tokens (35) = 65 exceeds the context length 64"},
      {"id = vocab", [](GenerationRequest& r) { r.prompt[2] = 64; },
       "prompt token 2 is id 64, outside the vocabulary [0, 64)"},
      {"negative id", [](GenerationRequest& r) { r.prompt[0] = -1; }, "prompt token 0 is id -1"},
      {"negative temperature", [](GenerationRequest& r) { r.sampling.temperature = -0.5f; }, "temperature is -0.5"},
      {"NaN temperature", [](GenerationRequest& r) { r.sampling.temperature = std::nanf(""); }, "temperature is nan"},
      {"infinite temperature",
       [](GenerationRequest& r) { r.sampling.temperature = std::numeric_limits<float>::infinity(); },
       "temperature is inf"},
      {"top_p 0", [](GenerationRequest& r) { r.sampling.top_p = 0.0f; }, "top_p is 0; it must be in (0, 1]"},
      {"top_p 1.5", [](GenerationRequest& r) { r.sampling.top_p = 1.5f; }, "top_p is 1.5"},
      {"top_k -1", [](GenerationRequest& r) { r.sampling.top_k = -1; }, "top_k is -1; it must be >= 0"},
  };
  for (const Case& c : cases) {
    GenerationRequest request = Request(NewAnswer(), Prompt(5, 1), 4);
    c.edit(request);
    absl::StatusOr<SequenceId> refused = batcher_->Enqueue(std::move(request));
    ASSERT_FALSE(refused.ok()) << c.name;
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(refused.status().message(), HasSubstr(c.message)) << c.name;
  }
  GenerationRequest late = Request(NewAnswer(), Prompt(5, 1), 4);
  late.deadline = clock_.Now();
  EXPECT_EQ(batcher_->Enqueue(std::move(late)).status().code(), absl::StatusCode::kDeadlineExceeded);
  GenerationRequest fits = Request(NewAnswer(), Prompt(32, 1), 32);  // both limits exactly
  EXPECT_TRUE(batcher_->Enqueue(std::move(fits)).ok());
  batcher_->Stop();
  absl::StatusOr<SequenceId> stopped = batcher_->Enqueue(Request(NewAnswer(), Prompt(5, 1), 4));
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(stopped.status().message(), HasSubstr("fake_llm is draining"));
  EXPECT_EQ(backend().call_count(), 32u);
}

TEST_F(ContinuousBatcherTest, StopFinishesEveryAcceptedSequenceThenRefuses) {
  gen().max_num_seqs = 2;
  Start();
  std::vector<std::shared_ptr<Answer>> answers{SubmitHeld(Prompt(3, 0), 6)};
  for (int i = 1; i < 5; ++i) answers.push_back(Submit(Prompt(3 + i, i), 6));
  std::thread stopper([&] { batcher_->Stop(); });
  ASSERT_TRUE(Eventually([&] {
    return batcher_->Enqueue(Request(NewAnswer(), Prompt(3, 9), 2)).status().code() == absl::StatusCode::kUnavailable;
  }));
  EXPECT_FALSE(answers[4]->done());
  backend().Release();
  stopper.join();  // returns only when all five are answered
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(answers[i]->done());
    ExpectReference(*answers[i], Prompt(3 + i, i), 6);
  }
  EXPECT_EQ(batcher_->Waiting(), 0);
  EXPECT_EQ(batcher_->Running(), 0);
  batcher_->Stop();  // idempotent
}

TEST_F(ContinuousBatcherTest, FailedPrefillFailsOnlyItsSequence) {
  Start();
  const std::vector<int32_t> doomed = Prompt(9, 2);
  backend().FailWhen([doomed](const BackendCall& c) -> std::optional<absl::Status> {
    if (c.prefill && c.prompt == doomed) return absl::InternalError("fake prefill failure");
    return std::nullopt;
  });
  auto a = SubmitHeld(Prompt(4, 1), 6);
  auto b = Submit(doomed, 6);
  backend().Release();
  ASSERT_TRUE(a->Wait());
  ASSERT_TRUE(b->Wait());
  ExpectReference(*a, Prompt(4, 1), 6);
  EXPECT_EQ(b->result().finish, FinishReason::kError);
  EXPECT_EQ(b->result().status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(b->result().status.message(),
              HasSubstr("model fake_llm, prefill (length 16), instance 0 (fake decoder): fake prefill failure"));
  EXPECT_EQ(b->result().output_tokens, 0);
  EXPECT_EQ(batcher_->InstancesInRotation(), 1);
  auto c = Submit(Prompt(5, 3), 4);
  ASSERT_TRUE(c->Wait());
  ExpectReference(*c, Prompt(5, 3), 4);
  bool failed_report = false;
  for (const GenerationStepReport& r : reports()) failed_report |= !r.ok && r.prefill && r.length == 16;
  EXPECT_TRUE(failed_report);
}

TEST_F(ContinuousBatcherTest, BackendExceptionFailsOnlyThatStepWithInternal) {
  Start();
  const std::vector<int32_t> doomed = Prompt(6, 7);
  backend().FailWhen([doomed](const BackendCall& c) -> std::optional<absl::Status> {
    if (c.prefill && c.prompt == doomed) throw std::runtime_error("fake exception");
    return std::nullopt;
  });
  auto a = SubmitHeld(Prompt(4, 1), 5);
  auto b = Submit(doomed, 5);
  backend().Release();
  ASSERT_TRUE(a->Wait());
  ASSERT_TRUE(b->Wait());
  ExpectReference(*a, Prompt(4, 1), 5);
  EXPECT_EQ(b->result().finish, FinishReason::kError);
  EXPECT_EQ(b->result().status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(b->result().status.message(), HasSubstr("the backend threw: fake exception"));
  EXPECT_EQ(batcher_->InstancesInRotation(), 1);
}

TEST_F(ContinuousBatcherTest, FailedDecodeCallFailsOnlyItsRows) {
  gen().kv_cache.slots = 6;
  gen().max_num_seqs = 6;
  Start();
  auto failed_once = std::make_shared<std::atomic<bool>>(false);
  backend().FailWhen([failed_once](const BackendCall& c) -> std::optional<absl::Status> {
    if (!c.prefill && c.rows.size() == 4 && !failed_once->exchange(true)) {
      return absl::InternalError("fake decode failure");
    }
    return std::nullopt;
  });
  std::vector<std::shared_ptr<Answer>> answers{SubmitHeld(Prompt(4, 0), 8)};
  for (int i = 1; i < 6; ++i) answers.push_back(Submit(Prompt(4, i), 8));
  backend().Release();
  for (auto& a : answers) ASSERT_TRUE(a->Wait());
  for (int i = 0; i < 4; ++i) {  // the first chunk of the six-row step
    EXPECT_EQ(answers[i]->result().finish, FinishReason::kError) << i;
    EXPECT_THAT(answers[i]->result().status.message(), HasSubstr("decode (batch 4, KV length 16)"));
  }
  EXPECT_EQ(answers[0]->result().output_tokens, 2);
  EXPECT_EQ(answers[1]->result().output_tokens, 1);
  for (int i = 4; i < 6; ++i) ExpectReference(*answers[i], Prompt(4, i), 8);
  EXPECT_EQ(batcher_->InstancesInRotation(), 1);
  auto later = Submit(Prompt(5, 9), 3);
  ASSERT_TRUE(later->Wait());
  ExpectReference(*later, Prompt(5, 9), 3);
}

TEST_F(ContinuousBatcherTest, UnavailableTakesTheInstanceOutAndTheOtherServes) {
  Start(2);
  backend(0).GoAway();
  backend(1).Hold();
  auto a = Submit(Prompt(4, 1), 5);
  ASSERT_TRUE(Eventually([&] { return backend(1).blocked() == 1 || batcher_->InstancesInRotation() == 1; }));
  // Either instance 1 holds a (then b goes to the idle instance 0 and fails), or instance 0 took a and failed.
  auto b = Submit(Prompt(5, 2), 5);
  ASSERT_TRUE(Eventually([&] { return batcher_->InstancesInRotation() == 1; }));
  backend(1).Release();
  ASSERT_TRUE(a->Wait());
  ASSERT_TRUE(b->Wait());
  const bool a_failed = !a->result().status.ok();
  Answer& failed = a_failed ? *a : *b;
  EXPECT_EQ(failed.result().status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(failed.result().finish, FinishReason::kError);
  EXPECT_THAT(failed.result().status.message(), HasSubstr("instance 0 (fake decoder): fake device gone"));
  if (a_failed) {
    ExpectReference(*b, Prompt(5, 2), 5);
  } else {
    ExpectReference(*a, Prompt(4, 1), 5);
  }
  for (int i = 0; i < 3; ++i) {
    auto later = Submit(Prompt(6, 10 + i), 4);
    ASSERT_TRUE(later->Wait());
    ExpectReference(*later, Prompt(6, 10 + i), 4);
  }
  EXPECT_EQ(backend(0).call_count(), 1u);
}

TEST_F(ContinuousBatcherTest, LastInstanceGoneFailsRunningAndWaitingAndRefusesNew) {
  gen().max_num_seqs = 1;
  Start();
  auto running = SubmitHeld(Prompt(4, 1), 5);
  auto waiting = Submit(Prompt(5, 2), 5);
  backend().GoAway();
  backend().Release();
  ASSERT_TRUE(running->Wait());
  ASSERT_TRUE(waiting->Wait());
  EXPECT_EQ(running->result().status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(running->result().finish, FinishReason::kError);
  EXPECT_EQ(waiting->result().status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(waiting->result().status.message(), HasSubstr("no instance left in rotation"));
  EXPECT_EQ(batcher_->InstancesInRotation(), 0);
  absl::StatusOr<SequenceId> refused = batcher_->Enqueue(Request(NewAnswer(), Prompt(4, 3), 2));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(backend().call_count(), 1u);
}

TEST_F(ContinuousBatcherTest, SeededSamplingIsTheSameWhateverSharesTheBatch) {
  Start();
  auto seeded = [&](std::shared_ptr<Answer> answer, uint64_t seed) {
    GenerationRequest request = Request(answer, Prompt(7, 3), 20);
    request.sampling = {0.9f, 20, 0.95f, seed};
    return request;
  };
  auto alone = NewAnswer();
  Submit(seeded(alone, 1234));
  ASSERT_TRUE(alone->Wait());
  ASSERT_EQ(alone->tokens().size(), 20u);
  EXPECT_NE(alone->tokens(), decoder_.Greedy(Prompt(7, 3), 20)) << "the draws should not all be the argmax";

  // Again, with companions (sampled without a seed, and greedy) before and after it in the same steps.
  std::vector<std::shared_ptr<Answer>> companions{SubmitHeld(Prompt(12, 1), 25)};
  GenerationRequest unseeded = Request(NewAnswer(), Prompt(3, 2), 15);
  unseeded.sampling.temperature = 1.5f;
  companions.push_back(Submit(std::move(unseeded)));
  auto again = NewAnswer();
  Submit(seeded(again, 1234));
  auto other_seed = NewAnswer();
  Submit(seeded(other_seed, 99));
  backend().Release();
  for (auto& c : companions) ASSERT_TRUE(c->Wait());
  ASSERT_TRUE(again->Wait());
  ASSERT_TRUE(other_seed->Wait());
  EXPECT_EQ(again->tokens(), alone->tokens());
  EXPECT_NE(other_seed->tokens(), alone->tokens());
  size_t widest = 0;
  for (const BackendCall& c : backend().calls()) widest = std::max(widest, c.rows.size());
  EXPECT_EQ(widest, 4u);
}

TEST_F(ContinuousBatcherTest, EngineSeedMakesUnseededSamplingReproducible) {
  std::vector<std::vector<int32_t>> runs;
  for (int run = 0; run < 2; ++run) {
    Start();
    GenerationRequest request = Request(NewAnswer(), Prompt(7, 3), 20);
    request.sampling.temperature = 1.0f;
    auto answer = Submit(std::move(request));
    ASSERT_TRUE(answer->Wait());
    runs.push_back(answer->tokens());
    batcher_->Stop();
    batcher_.reset();
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_NE(runs[0], decoder_.Greedy(Prompt(7, 3), 20));
}

}  // namespace
}  // namespace sluice

namespace sluice {
namespace {

// Issue 23: a hung Prefill/Decode blocked its engine thread, its sequences and Stop() forever. The watchdog answers
// them UNAVAILABLE at generation.execution_timeout_ms (fake clock) and takes the instance out; the other serves.
TEST_F(ContinuousBatcherTest, AHungPrefillIsAnsweredAtTheTimeoutAndItsInstanceLeavesRotation) {
  gen().execution_timeout_ms = 1000;
  Start(2);
  backend(0).Hold();
  backend(1).Hold();
  auto hung = Submit(Prompt(4, 1), 5);
  ASSERT_TRUE(Eventually([&] { return backend(0).blocked() + backend(1).blocked() == 1; }));
  const int h = backend(0).blocked() == 1 ? 0 : 1;
  backend(1 - h).Release();
  clock_.Advance(absl::Milliseconds(999));
  absl::SleepFor(absl::Milliseconds(20));  // room for a wrong early answer (the watchdog polls every 1 ms)
  EXPECT_FALSE(hung->done()) << "answered before the timeout";
  clock_.Advance(absl::Milliseconds(2));
  ASSERT_TRUE(hung->Wait());
  const GenerationResult result = hung->result();
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(result.finish, FinishReason::kError);
  EXPECT_THAT(result.status.message(), HasSubstr(absl::StrCat("model fake_llm, prefill (length 8), instance ", h,
                                                              " (fake decoder)")));
  EXPECT_THAT(result.status.message(), HasSubstr("execution_timeout_ms 1000"));
  EXPECT_EQ(batcher_->InstancesInRotation(), 1);
  bool reported = false;
  for (const GenerationStepReport& r : reports()) reported |= r.timed_out && r.instance == h && !r.ok;
  EXPECT_TRUE(reported) << "no timed_out step report for the metrics";
  // The other instance serves everything after it.
  for (int i = 0; i < 3; ++i) {
    auto later = Submit(Prompt(6, 10 + i), 4);
    ASSERT_TRUE(later->Wait());
    ExpectReference(*later, Prompt(6, 10 + i), 4);
  }
  // When the hung call finally returns, its late result is dropped: nobody is answered twice.
  const size_t calls = backend(h).call_count();
  backend(h).Release();
  batcher_->Stop();
  EXPECT_EQ(hung->done_calls(), 1);
  EXPECT_EQ(backend(h).call_count(), calls);  // never given another call
}

// Issue 30: a decode step that hangs on one instance while the other instance is generating. Only the hung
// instance's sequence fails (after the tokens it already streamed), the other's running sequence is never
// disturbed and finishes with its reference tokens, and new sequences go to the instance left.
TEST_F(ContinuousBatcherTest, AHungDecodeFailsOnlyItsInstancesSequencesWhileTheOtherInstanceGoesOnGenerating) {
  gen().execution_timeout_ms = 1000;
  Start(2);
  backend(0).Hold();
  backend(1).Hold();
  auto hung = Submit(Prompt(4, 1), 20);
  ASSERT_TRUE(Eventually([&] { return backend(0).blocked() + backend(1).blocked() == 1; }));
  const int h = backend(0).blocked() == 1 ? 0 : 1;
  const int other = 1 - h;
  auto running = Submit(Prompt(5, 2), 20);  // only the other instance is free to admit it
  ASSERT_TRUE(Eventually([&] { return backend(other).blocked() == 1; }));
  // The hung instance runs its prefill and one decode step, then its second decode step (call 3) hangs.
  backend(h).ReleaseUntilCall(3);
  ASSERT_TRUE(Eventually([&] { return backend(h).blocked() == 1 && backend(h).call_count() == 3; }));
  // The other instance generates all 20 tokens meanwhile (20 calls of 5 ms of fake time: within the timeout).
  backend(other).Release();
  ASSERT_TRUE(running->Wait());
  ExpectReference(*running, Prompt(5, 2), 20);
  EXPECT_FALSE(hung->done()) << "answered before its call ran past the timeout";
  clock_.Advance(absl::Milliseconds(1000));
  ASSERT_TRUE(hung->Wait());
  const GenerationResult result = hung->result();
  EXPECT_EQ(result.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(result.finish, FinishReason::kError);
  EXPECT_THAT(result.status.message(), HasSubstr(absl::StrCat("model fake_llm, decode (batch 1, KV length 16), instance ",
                                                              h, " (fake decoder)")));
  EXPECT_THAT(result.status.message(), HasSubstr("the instance is out of rotation"));
  EXPECT_EQ(hung->tokens(), decoder_.Greedy(Prompt(4, 1), 2));  // streamed before the hang, and nothing after
  EXPECT_EQ(result.output_tokens, 2);
  EXPECT_EQ(batcher_->InstancesInRotation(), 1);
  EXPECT_EQ(batcher_->Running(), 0);  // the hung sequence's slot was released when it was answered
  // New sequences avoid the hung instance, while its call still hangs and after it has returned.
  const size_t hung_calls = backend(h).call_count();
  for (int i = 0; i < 4; ++i) {
    if (i == 2) backend(h).Release();  // its late result is dropped; its engine thread ends
    auto later = Submit(Prompt(6, 20 + i), 3);
    ASSERT_TRUE(later->Wait());
    ExpectReference(*later, Prompt(6, 20 + i), 3);
  }
  EXPECT_EQ(backend(h).call_count(), hung_calls);
  batcher_->Stop();
  EXPECT_EQ(hung->done_calls(), 1);
  EXPECT_EQ(hung->tokens().size(), 2u);
}

TEST_F(ContinuousBatcherTest, StopDoesNotWaitForAHungDecodeAndTheLastInstanceGoneFailsTheWaiting) {
  gen().execution_timeout_ms = 500;
  gen().max_num_seqs = 1;
  Start();
  backend().HoldFromCall(2);  // the prefill runs, the first decode step hangs
  auto running = Submit(Prompt(4, 1), 5);
  ASSERT_TRUE(Eventually([&] { return backend().blocked() == 1; }));
  auto waiting = Submit(Prompt(5, 2), 5);
  clock_.Advance(absl::Milliseconds(501));
  ASSERT_TRUE(running->Wait());
  ASSERT_TRUE(waiting->Wait());
  EXPECT_EQ(running->result().status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(running->result().status.message(), HasSubstr("decode (batch 1, KV length 16), instance 0"));
  EXPECT_EQ(running->tokens().size(), 1u);  // the prefill's token came; the hung step's never does
  EXPECT_EQ(waiting->result().status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(waiting->result().status.message(), HasSubstr("no instance left in rotation"));
  absl::StatusOr<SequenceId> refused = batcher_->Enqueue(Request(NewAnswer(), Prompt(4, 3), 2));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  batcher_->Stop();  // returns with the backend still held (it hung here before the watchdog)
  EXPECT_EQ(backend().blocked(), 1);
  // TearDown releases the backend; the destructor then joins the returning thread.
}

}  // namespace
}  // namespace sluice
