// The continuous batcher's chunked prefill (generation.prefill_chunk_lengths), deterministic: a FakeClock that
// moves by the fake backend's 5 ms per call, and FakeGenerationBackend, which checks that every chunk continues
// exactly what its slot holds and uses the smallest chunk and KV buckets. Each policy rule has a test: chunks
// interleave with decode steps, the iteration token budget, decode_first, the first chunk always runs, and a
// cancel, deadline or failure mid-prompt frees the slot.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "scheduler/continuous_batcher.h"
#include "tests/scheduler/fake_generation_backend.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace sluice {
namespace {

using ::sluice::testing::BackendCall;
using ::sluice::testing::Eventually;
using ::sluice::testing::FakeDecoder;
using ::sluice::testing::FakeGenerationBackend;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// What came back for one sequence; filled on the engine thread, read by the test.
class Answer {
 public:
  bool OnToken(const GeneratedToken& token) {
    MutexLock lock(&mu_);
    tokens_.push_back(token.id);
    return true;
  }
  void OnDone(GenerationResult result) {
    {
      MutexLock lock(&mu_);
      result_ = std::move(result);
    }
    done_.Notify();
  }
  bool Wait() { return done_.WaitForNotificationWithTimeout(absl::Seconds(20)); }
  std::vector<int32_t> tokens() const {
    MutexLock lock(&mu_);
    return tokens_;
  }
  GenerationResult result() const {
    MutexLock lock(&mu_);
    return result_;
  }

 private:
  mutable Mutex mu_;
  testing::Event done_;
  std::vector<int32_t> tokens_ ABSL_GUARDED_BY(mu_);
  GenerationResult result_ ABSL_GUARDED_BY(mu_);
};

std::vector<int32_t> Prompt(int n, int salt) {
  std::vector<int32_t> prompt;
  for (int i = 0; i < n; ++i) prompt.push_back(3 + (salt * 7 + i * 13 + salt * i) % 61);
  return prompt;
}

// Vocabulary 64, context 64; chunks of 8 (4 and 8 where a test says), KV lengths 16/32/64; 4 slots; budget 9: one
// decode row and a full chunk per iteration.
GenerationOptions ChunkedGeneration() {
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
  gen.prefill_chunk_lengths = {8};
  gen.iteration_token_budget = 9;
  gen.decode_first = true;
  return gen;
}

class ChunkedPrefillTest : public ::testing::Test {
 protected:
  ChunkedPrefillTest() {
    model_.name = "fake_llm";
    model_.kind = ModelKind::kGeneration;
    model_.generation = ChunkedGeneration();
  }
  GenerationOptions& gen() { return *model_.generation; }

  void Start() {
    backend_ = std::make_unique<FakeGenerationBackend>(gen(), decoder_, &clock_);
    ContinuousBatcherOptions options;
    options.model = &model_;
    options.instances = {backend_.get()};
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
    if (backend_) backend_->Release();
    if (batcher_) batcher_->Stop();
    if (backend_) EXPECT_THAT(backend_->violations(), IsEmpty());
  }

  std::shared_ptr<Answer> Submit(std::vector<int32_t> prompt, int max_tokens, SequenceId* id = nullptr,
                                 absl::Time deadline = absl::InfiniteFuture()) {
    auto answer = std::make_shared<Answer>();
    GenerationRequest request;
    request.prompt = std::move(prompt);
    request.max_tokens = max_tokens;
    request.deadline = deadline;
    request.on_token = [answer](const GeneratedToken& t) { return answer->OnToken(t); };
    request.on_done = [answer](GenerationResult r) { answer->OnDone(std::move(r)); };
    absl::StatusOr<SequenceId> accepted = batcher_->Enqueue(std::move(request));
    EXPECT_TRUE(accepted.ok()) << accepted.status();
    if (accepted.ok() && id != nullptr) *id = *accepted;
    return answer;
  }
  // Holds the backend and submits a sequence whose first chunk then waits inside it.
  std::shared_ptr<Answer> SubmitHeld(std::vector<int32_t> prompt, int max_tokens) {
    backend_->Hold();
    auto answer = Submit(std::move(prompt), max_tokens);
    EXPECT_TRUE(Eventually([&] { return backend_->blocked() == 1; }));
    return answer;
  }
  // "C<tokens>" for a chunk, "P<tokens>" for a whole prefill, "D<rows>" for a decode step, in call order.
  std::vector<std::string> Trace() const {
    std::vector<std::string> out;
    for (const BackendCall& c : backend_->calls()) {
      if (c.chunk_start >= 0) {
        out.push_back(absl::StrCat("C", c.prompt.size()));
      } else {
        out.push_back(c.prefill ? absl::StrCat("P", c.prompt.size()) : absl::StrCat("D", c.rows.size()));
      }
    }
    return out;
  }
  std::vector<std::string> TraceHead(size_t n) const {
    std::vector<std::string> t = Trace();
    t.resize(std::min(n, t.size()));
    return t;
  }
  void ExpectReference(Answer& answer, const std::vector<int32_t>& prompt, int max_tokens) {
    const GenerationResult result = answer.result();
    EXPECT_TRUE(result.status.ok()) << result.status;
    EXPECT_EQ(result.finish, FinishReason::kLength);
    EXPECT_EQ(result.prompt_tokens, static_cast<int>(prompt.size()));
    EXPECT_EQ(answer.tokens(), decoder_.Greedy(prompt, max_tokens));
  }
  std::vector<GenerationStepReport> reports() {
    MutexLock lock(&reports_mu_);
    return reports_;
  }

  ModelConfig model_;
  FakeDecoder decoder_;
  FakeClock clock_;
  std::unique_ptr<FakeGenerationBackend> backend_;
  std::unique_ptr<ContinuousBatcher> batcher_;
  Mutex reports_mu_;
  std::vector<GenerationStepReport> reports_ ABSL_GUARDED_BY(reports_mu_);
};

TEST_F(ChunkedPrefillTest, APromptIsWrittenChunkByChunkAndGetsItsSingleSequenceTokens) {
  Start();
  auto answer = Submit(Prompt(30, 1), 5);
  ASSERT_TRUE(answer->Wait());
  ExpectReference(*answer, Prompt(30, 1), 5);
  EXPECT_THAT(Trace(), ElementsAre("C8", "C8", "C8", "C6", "D1", "D1", "D1", "D1"));
  std::vector<int64_t> starts, kv_lengths;
  for (const BackendCall& c : backend_->calls()) {
    if (c.chunk_start < 0) continue;
    starts.push_back(c.chunk_start);
    kv_lengths.push_back(c.chunk_kv_length);
    EXPECT_EQ(c.length, 8) << "every chunk, the last (6 tokens) included, runs the 8-token graph";
  }
  EXPECT_THAT(starts, ElementsAre(0, 8, 16, 24));
  EXPECT_THAT(kv_lengths, ElementsAre(16, 16, 32, 32));  // the smallest KV length holding [0, start + n)
  const std::vector<GenerationStepReport> r = reports();
  ASSERT_GE(r.size(), 4u);
  EXPECT_TRUE(r[0].prefill && r[0].chunk);
  EXPECT_EQ(r[3].real_tokens, 6);
  EXPECT_EQ(r[3].length, 8);
  EXPECT_FALSE(r[4].chunk);
}

TEST_F(ChunkedPrefillTest, ALongPromptDelaysARunningSequenceByOneChunkPerStep) {
  Start();
  auto running = SubmitHeld(Prompt(4, 1), 12);
  auto long_prompt = Submit(Prompt(30, 2), 3);
  backend_->Release();
  ASSERT_TRUE(running->Wait());
  ASSERT_TRUE(long_prompt->Wait());
  ExpectReference(*running, Prompt(4, 1), 12);
  ExpectReference(*long_prompt, Prompt(30, 2), 3);
  // The budget (9) holds one decode row and one 8-token chunk: the running sequence decodes between chunks.
  EXPECT_THAT(TraceHead(12), ElementsAre("C4", "D1", "C8", "D1", "C8", "D1", "C8", "D1", "C6", "D2", "D2", "D1"));
}

TEST_F(ChunkedPrefillTest, TheBudgetAllowsSeveralChunksPerIterationLargestFirst) {
  gen().prefill_chunk_lengths = {4, 8};
  gen().iteration_token_budget = 13;  // 1 decode row + 12 prompt tokens: a chunk of 8, then one of 4
  Start();
  auto running = SubmitHeld(Prompt(3, 1), 6);
  auto long_prompt = Submit(Prompt(30, 2), 2);
  backend_->Release();
  ASSERT_TRUE(running->Wait());
  ASSERT_TRUE(long_prompt->Wait());
  ExpectReference(*running, Prompt(3, 1), 6);
  ExpectReference(*long_prompt, Prompt(30, 2), 2);
  // 30 = 8 + 4 | 8 + 4 | 6 (the last, 6 tokens, in the 8 graph).
  EXPECT_THAT(TraceHead(10), ElementsAre("C3", "D1", "C8", "C4", "D1", "C8", "C4", "D1", "C6", "D2"));
  for (const BackendCall& c : backend_->calls()) {
    if (c.chunk_start >= 0 && c.prompt.size() <= 4) EXPECT_EQ(c.length, 4);
  }
}

TEST_F(ChunkedPrefillTest, TheFirstChunkRunsEvenWhenDecodeRowsUseTheWholeBudget) {
  gen().prefill_chunk_lengths = {4, 8};
  gen().iteration_token_budget = 2;  // two decode rows spend it all
  Start();
  auto a = SubmitHeld(Prompt(3, 1), 30);
  auto b = Submit(Prompt(3, 2), 30);
  auto long_prompt = Submit(Prompt(20, 3), 2);
  backend_->Release();
  for (auto& x : {a, b, long_prompt}) ASSERT_TRUE(x->Wait());
  ExpectReference(*long_prompt, Prompt(20, 3), 2);
  // a's chunk; then b's whole prompt after a's decode; then every iteration a decode of both and one chunk.
  EXPECT_THAT(TraceHead(14), ElementsAre("C3", "D1", "C3", "D2", "C4", "D2", "C4", "D2", "C4", "D2", "C4", "D2", "C4",
                                         "D3"));
  // Every chunk of the long prompt is the smallest (4 tokens), one per iteration, each after a decode step.
  const std::vector<std::string> trace = Trace();
  const std::vector<BackendCall> calls = backend_->calls();
  const std::vector<int32_t> prompt = Prompt(20, 3);
  int chunks = 0;
  for (size_t i = 0; i < trace.size(); ++i) {
    if (chunks == 5 || trace[i] != "C4" ||
        calls[i].prompt != std::vector<int32_t>(prompt.begin() + chunks * 4, prompt.begin() + chunks * 4 + 4)) {
      continue;
    }
    ++chunks;
    ASSERT_GT(i, 0u);
    EXPECT_EQ(trace[i - 1][0], 'D') << "call " << i;
  }
  EXPECT_EQ(chunks, 5);
}

TEST_F(ChunkedPrefillTest, DecodeFirstFalseRunsChunksFirstAndAFinishedPromptJoinsThatIterationsDecode) {
  gen().decode_first = false;
  Start();
  auto running = SubmitHeld(Prompt(4, 1), 8);
  auto long_prompt = Submit(Prompt(12, 2), 3);
  backend_->Release();
  ASSERT_TRUE(running->Wait());
  ASSERT_TRUE(long_prompt->Wait());
  ExpectReference(*running, Prompt(4, 1), 8);
  ExpectReference(*long_prompt, Prompt(12, 2), 3);
  // A's first chunk is its whole prompt; then each iteration runs a chunk of B before the decode step, and B's
  // last chunk (4 tokens) is followed by a decode of both in the same iteration.
  EXPECT_THAT(TraceHead(6), ElementsAre("C4", "D1", "C8", "D1", "C4", "D2"));
}

TEST_F(ChunkedPrefillTest, ACancelMidPromptFreesTheSlotForTheNextPrompt) {
  Start();
  backend_->HoldFromCall(2);  // the second chunk waits inside the backend
  SequenceId id = 0;
  auto cancelled = Submit(Prompt(30, 1), 5, &id);
  ASSERT_TRUE(Eventually([&] { return backend_->blocked() == 1; }));
  batcher_->Cancel(id);
  backend_->Release();
  ASSERT_TRUE(cancelled->Wait());
  EXPECT_EQ(cancelled->result().status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(cancelled->result().finish, FinishReason::kCancelled);
  EXPECT_THAT(cancelled->tokens(), IsEmpty());
  EXPECT_EQ(backend_->call_count(), 2u) << "no chunk after the cancel";
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0; }));
  auto next = Submit(Prompt(10, 2), 2);
  ASSERT_TRUE(next->Wait());
  ExpectReference(*next, Prompt(10, 2), 2);
  EXPECT_EQ(backend_->calls()[2].rows[0].slot, 0) << "slot 0 was freed";
  EXPECT_EQ(backend_->calls()[2].chunk_start, 0);
}

TEST_F(ChunkedPrefillTest, ADeadlineMidPromptEndsItAndFreesTheSlot) {
  Start();  // each chunk costs 5 ms of fake time
  auto late = Submit(Prompt(30, 1), 5, nullptr, clock_.Now() + absl::Milliseconds(12));
  ASSERT_TRUE(late->Wait());
  EXPECT_EQ(late->result().status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(late->result().status.message()), HasSubstr("prefilled"));
  EXPECT_THAT(Trace(), ElementsAre("C8", "C8", "C8"));  // the iteration starting at +15 ms ends it
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0; }));
  auto next = Submit(Prompt(5, 2), 2);
  ASSERT_TRUE(next->Wait());
  ExpectReference(*next, Prompt(5, 2), 2);
}

TEST_F(ChunkedPrefillTest, AFailedChunkFailsItsSequenceOnlyAndOthersGoOn) {
  Start();
  backend_->FailWhen([](const BackendCall& call) -> std::optional<absl::Status> {
    if (call.chunk_start == 8) return absl::InternalError("chunk exploded");
    return std::nullopt;
  });
  auto running = SubmitHeld(Prompt(6, 1), 6);
  auto failing = Submit(Prompt(20, 2), 3);
  backend_->Release();
  ASSERT_TRUE(running->Wait());
  ASSERT_TRUE(failing->Wait());
  ExpectReference(*running, Prompt(6, 1), 6);
  EXPECT_EQ(failing->result().status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(failing->result().status.message()), HasSubstr("prefill chunk (chunk 8, KV length 16)"));
  EXPECT_THAT(std::string(failing->result().status.message()), HasSubstr("chunk exploded"));
  EXPECT_TRUE(Eventually([&] { return batcher_->Running() == 0; }));
  EXPECT_EQ(batcher_->InstancesInRotation(), 1);
}

TEST_F(ChunkedPrefillTest, ManyInterleavedPromptsAllGetTheirSingleSequenceTokens) {
  gen().prefill_chunk_lengths = {4, 8};
  gen().iteration_token_budget = 12;
  gen().max_queue_size = 16;
  Start();
  const int lengths[] = {1, 30, 3, 17, 8, 25, 1, 12, 32};
  const int max_tokens[] = {60, 6, 20, 9, 12, 4, 15, 7, 5};  // the first runs throughout: every iteration decodes
  std::vector<std::shared_ptr<Answer>> answers;
  backend_->Hold();
  for (int i = 0; i < 9; ++i) answers.push_back(Submit(Prompt(lengths[i], i), max_tokens[i]));
  backend_->Release();
  for (int i = 0; i < 9; ++i) {
    ASSERT_TRUE(answers[i]->Wait());
    SCOPED_TRACE(i);
    ExpectReference(*answers[i], Prompt(lengths[i], i), max_tokens[i]);
  }
  // No iteration spends more than its budget, beyond the one chunk that always runs.
  int64_t spent = 0;
  bool chunk_seen = false;
  for (const BackendCall& c : backend_->calls()) {
    if (c.chunk_start < 0) {  // a decode step opens an iteration (decode first)
      spent = static_cast<int64_t>(c.rows.size());
      chunk_seen = false;
      continue;
    }
    spent += static_cast<int64_t>(c.prompt.size());
    if (chunk_seen) EXPECT_LE(spent, 12);
    chunk_seen = true;
  }
}

}  // namespace
}  // namespace sluice
