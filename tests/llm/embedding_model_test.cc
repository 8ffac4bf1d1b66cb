// EmbeddingModel (server/llm/embedding_model.h) in-process over a real ServedModel and DynamicBatcher, on a backend
// the test can hold inside a running batch (batch size 1: one row runs, the rest wait), so which rows run and which
// are withdrawn is decided by the test, never by timing. A WordLevel tokenizer.json: word i of "w0".."w9" is id i.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "backend/base/model_config.h"
#include "backend/base/sync.h"
#include "server/core/served_model.h"
#include "server/core/serving_state.h"
#include "server/llm/embedding_model.h"
#include "tests/scheduler/holdable_backend.h"
#include "tests/server/completions.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;

constexpr char kTokenizerJson[] = R"({
  "version": "1.0", "truncation": null, "padding": null, "added_tokens": [], "normalizer": null,
  "pre_tokenizer": {"type": "Whitespace"}, "post_processor": null, "decoder": null,
  "model": {"type": "WordLevel", "unk_token": "w0",
            "vocab": {"w0": 0, "w1": 1, "w2": 2, "w3": 3, "w4": 4, "w5": 5, "w6": 6, "w7": 7, "w8": 8, "w9": 9}}
})";

std::filesystem::path RepositoryDir() {
  return std::filesystem::temp_directory_path() / ("embedding_model_test_" + std::to_string(::getpid()));
}

// Writes <RepositoryDir()>/embed/{config.yaml,tokenizer.json} and loads the config.
ModelConfig WriteEmbeddingModel() {
  const std::filesystem::path dir = RepositoryDir() / "embed";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << kTokenizerJson;
  std::ofstream(dir / "config.yaml") << "name: embed\nkind: text\n"
                                        "inputs: [{name: input_ids, dtype: INT64, shape: [-1], range: [0, 9]}]\n"
                                        "outputs: [{name: embedding, dtype: FP32, shape: [2]}]\n"
                                        "buckets: {lengths: [4], batch_sizes: [1]}\n"
                                        "batching: {max_queue_delay_ms: 0, max_queue_size: 16}\n"
                                        "instances: [{device: cpu}]\n"
                                        "embedding: {tokenizer: tokenizer.json}\n";
  absl::StatusOr<ModelConfig> config = LoadModelConfig(dir.string());
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

// Answers each row with [its first token, its length]; records the first token of every row that ran.
class FirstTokenBackend final : public testing::HoldableBackend {
 public:
  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    const auto ids = batch.inputs[0].values<int64_t>();  // [B, L]
    {
      MutexLock lock(&mu_);
      for (int b = 0; b < static_cast<int>(batch.row_lengths.size()); ++b) ran_.push_back(ids[b * batch.length]);
      entered_.SignalAll();
      WaitWhileHeld();
    }
    HostTensor out = HostTensor::Zeros(DataType::kFp32, {batch.batch_size, 2});
    for (int b = 0; b < static_cast<int>(batch.row_lengths.size()); ++b) {
      out.values<float>()[2 * b] = static_cast<float>(ids[b * batch.length]);
      out.values<float>()[2 * b + 1] = static_cast<float>(batch.row_lengths[b]);
    }
    BatchResult result;
    result.outputs.push_back(std::move(out));
    return result;
  }
  const std::vector<BucketLoadStats>& load_stats() const override { return load_stats_; }
  std::string Describe() const override { return "first-token"; }

  // Waits (real time, bounded) until `n` rows have entered Execute.
  bool WaitForRows(size_t n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    MutexLock lock(&mu_);
    while (ran_.size() < n && absl::Now() < give_up) entered_.WaitUntil(&mu_, give_up);
    return ran_.size() >= n;
  }
  std::vector<int64_t> ran() {
    MutexLock lock(&mu_);
    return ran_;
  }

 private:
  const std::vector<BucketLoadStats> load_stats_ = {{1, 4, 0, 0, 0.001}};
  CondVar entered_;
  std::vector<int64_t> ran_ ABSL_GUARDED_BY(mu_);
};

// The answers of one Embed call (it may come on any thread, after the test body's locals are gone).
using Answer = testing::Completions<absl::StatusOr<EmbeddingResult>>;

class EmbeddingModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServedModelOptions options;
    options.config = &config_;
    options.instances = {&backend_};
    options.state = &state_;
    absl::StatusOr<std::unique_ptr<ServedModel>> served = ServedModel::Create(options);
    ASSERT_TRUE(served.ok()) << served.status();
    served_ = *std::move(served);
    state_.SetReady();
    absl::StatusOr<std::unique_ptr<EmbeddingModel>> model = EmbeddingModel::Create(served_.get());
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }
  void TearDown() override {
    backend_.Release();
    model_.reset();   // waits for its tokenizing jobs
    served_.reset();  // stops the scheduler: every accepted row is answered before the backend goes
    std::error_code ignored;
    std::filesystem::remove_all(RepositoryDir(), ignored);
  }

  std::shared_ptr<Answer> Embed(std::vector<std::string> texts, EmbeddingHandle* handle = nullptr) {
    std::shared_ptr<Answer> answer = Answer::Make();
    EmbeddingHandle h = model_->Embed(EmbeddingCall{std::move(texts)}, Answer::For(answer));
    if (handle != nullptr) *handle = h;
    return answer;
  }
  // Waits (real time, bounded) until `n` rows wait in the batcher's queue.
  bool WaitForQueued(int n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (served_->scheduler().QueueDepth() < n && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
    return served_->scheduler().QueueDepth() >= n;
  }

  ModelConfig config_ = WriteEmbeddingModel();
  ServingState state_;
  FirstTokenBackend backend_;
  std::unique_ptr<ServedModel> served_;
  std::unique_ptr<EmbeddingModel> model_;
};

TEST_F(EmbeddingModelTest, AnswersEveryInputsVectorInInputOrder) {
  std::shared_ptr<Answer> answer = Embed({"w3 w1", "w7", "w5 w5 w5"});
  ASSERT_TRUE(answer->WaitForOne(absl::Seconds(10)));
  ASSERT_TRUE(answer->first().ok()) << answer->first().status();
  const EmbeddingResult result = *answer->first();
  EXPECT_THAT(result.vectors, ElementsAre(ElementsAre(3, 2), ElementsAre(7, 1), ElementsAre(5, 3)));
  EXPECT_EQ(result.prompt_tokens, 6);
}

TEST_F(EmbeddingModelTest, CancelWithdrawsTheQueuedRowsWhileTheRunningRowFinishes) {
  backend_.Hold();
  EmbeddingHandle handle;
  std::shared_ptr<Answer> answer = Embed({"w1", "w2", "w3"}, &handle);
  ASSERT_TRUE(backend_.WaitForRows(1));  // w1 runs, held
  ASSERT_TRUE(WaitForQueued(2));         // w2 and w3 wait behind it
  model_->WaitForSubmitted();            // and the call holds all three rows' handles
  handle.Cancel();                       // the client went away
  EXPECT_EQ(served_->scheduler().QueueDepth(), 0) << "the queued rows left the queue at once";
  EXPECT_EQ(answer->count(), 0u) << "the call waits for its running row";
  backend_.Release();
  ASSERT_TRUE(answer->WaitForOne(absl::Seconds(10)));
  EXPECT_EQ(answer->first().status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(backend_.ran(), ElementsAre(1)) << "only the row that was running when the client left ran";
  handle.Cancel();  // after the answer: harmless
  EXPECT_EQ(answer->count(), 1u);

  // The model serves on.
  std::shared_ptr<Answer> next = Embed({"w4"});
  ASSERT_TRUE(next->WaitForOne(absl::Seconds(10)));
  ASSERT_TRUE(next->first().ok()) << next->first().status();
  EXPECT_THAT(next->first()->vectors, ElementsAre(ElementsAre(4, 1)));
}

TEST_F(EmbeddingModelTest, ACallCancelledAsItIsTokenizedNeverRunsAndAnswersCancelledOnce) {
  // Another call holds the instance, so whatever of this call gets submitted before Cancel only queues: whether
  // Cancel comes before tokenizing, between rows or after the last one, none of its rows may run.
  backend_.Hold();
  std::shared_ptr<Answer> blocker = Embed({"w9"});
  ASSERT_TRUE(backend_.WaitForRows(1));
  EmbeddingHandle handle;
  std::shared_ptr<Answer> answer = Embed({"w1", "w2", "w3", "w4"}, &handle);
  handle.Cancel();
  ASSERT_TRUE(answer->WaitForOne(absl::Seconds(10)));
  EXPECT_EQ(answer->first().status().code(), absl::StatusCode::kCancelled);
  backend_.Release();
  ASSERT_TRUE(blocker->WaitForOne(absl::Seconds(10)));
  EXPECT_TRUE(blocker->first().ok()) << blocker->first().status();
  model_->WaitForSubmitted();
  EXPECT_EQ(served_->scheduler().QueueDepth(), 0);
  EXPECT_THAT(backend_.ran(), ElementsAre(9));
  EXPECT_EQ(answer->count(), 1u);
}

TEST_F(EmbeddingModelTest, ARefusedCallHasAnEmptyHandle) {
  std::shared_ptr<Answer> answer = Answer::Make();
  EmbeddingHandle handle = model_->Embed(absl::InvalidArgumentError("bad body"), Answer::For(answer));
  ASSERT_EQ(answer->count(), 1u);  // on the caller's thread
  EXPECT_EQ(answer->first().status().code(), absl::StatusCode::kInvalidArgument);
  handle.Cancel();  // nothing to withdraw
  EXPECT_EQ(answer->count(), 1u);
}

}  // namespace
}  // namespace sluice
