// ServedModel::Infer, the one request path, in-process: a real DynamicBatcher on a FakeClock over an echoing
// backend that a test can hold inside a running batch, so which rows run, which wait and which are withdrawn is
// decided by the test, never by timing. Also ModelHub's lookups before and after Publish.
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "backend/base/model_config.h"
#include "scheduler/clock.h"
#include "backend/base/sync.h"
#include "server/hub/model_hub.h"
#include "server/core/served_model.h"
#include "server/metrics/server_metrics.h"
#include "tests/scheduler/holdable_backend.h"
#include "tests/server/completions.h"
#include "tests/server/metrics_samples.h"
#include "tests/server/model_yaml.h"

namespace sluice {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kEchoYaml[] = R"(name: echo
kind: text
inputs: [{name: tokens, dtype: INT64, shape: [-1], range: [0, 999]}]
outputs:
  - {name: first_token, dtype: INT64, shape: [1]}
  - {name: doubled, dtype: INT64, shape: [-1]}
buckets: {lengths: [4, 8], batch_sizes: [1, 2, 4]}
batching: {max_queue_delay_ms: 1000, max_queue_size: 3, priority_levels: 3, default_priority_level: 2}
instances: [{device: cpu}]
)";

ModelConfig EchoModel() { return testing::ParseModelYaml(kEchoYaml); }

// Answers each row with its first token and its tokens doubled. Hold() keeps the next batch inside Execute until
// Release(). Its warm-up figures make one row the most efficient batch size, so the batcher runs every row on its
// own the moment the instance is free: with the instance held, the first row runs and the rest stay queued.
class EchoBackend final : public testing::HoldableBackend {
 public:
  explicit EchoBackend(const ModelConfig& model) {
    for (int64_t length : model.buckets.lengths) {
      for (int b : model.buckets.batch_sizes) load_stats_.push_back({b, length, 0, 0, b == 1 ? 0.001 : 1.0 * b});
    }
  }

  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    const HostTensor& tokens = batch.inputs[0];  // [B, L]
    const auto in = tokens.values<int64_t>();
    {
      MutexLock lock(&mu_);
      for (int b = 0; b < static_cast<int>(batch.row_lengths.size()); ++b) started_rows_.push_back(in[b * batch.length]);
      ++batches_;
      cv_.SignalAll();
      WaitWhileHeld();
    }
    BatchResult result;
    HostTensor first = HostTensor::Zeros(DataType::kInt64, {batch.batch_size, 1});
    HostTensor doubled = HostTensor::Zeros(DataType::kInt64, {batch.batch_size, batch.length});
    for (int b = 0; b < batch.batch_size; ++b) {
      first.values<int64_t>()[b] = in[b * batch.length];
      for (int64_t t = 0; t < batch.length; ++t) {
        doubled.values<int64_t>()[b * batch.length + t] = 2 * in[b * batch.length + t];
      }
    }
    result.outputs.push_back(std::move(first));
    result.outputs.push_back(std::move(doubled));
    result.output_lengths = batch.row_lengths;
    return result;
  }
  const std::vector<BucketLoadStats>& load_stats() const override { return load_stats_; }
  std::string Describe() const override { return "echo"; }

  // Waits (real time, bounded) until `n` batches have entered Execute.
  bool WaitForBatches(int n) {
    const absl::Time give_up = absl::Now() + absl::Seconds(5);
    MutexLock lock(&mu_);
    while (batches_ < n && absl::Now() < give_up) cv_.WaitUntil(&mu_, give_up);
    return batches_ >= n;
  }
  int batches() {
    MutexLock lock(&mu_);
    return batches_;
  }
  // The first token of every row that ran, in the order the rows started.
  std::vector<int64_t> started_rows() {
    MutexLock lock(&mu_);
    return started_rows_;
  }

 private:
  std::vector<BucketLoadStats> load_stats_;
  CondVar cv_;  // signalled as each batch enters Execute
  int batches_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> started_rows_ ABSL_GUARDED_BY(mu_);
};

// Every completion of one Infer call, with the thread it ran on.
using Answers = testing::Completions<absl::StatusOr<InferResult>>;

// `rows` x `length` tokens; token t of row r is base + 10 * r + t.
InferCall TokensCall(int64_t rows, int64_t length, int64_t base = 100) {
  InferCall call;
  std::vector<int64_t> tokens;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < length; ++t) tokens.push_back(base + 10 * r + t);
  }
  std::string& bytes = call.storage.emplace_back(reinterpret_cast<const char*>(tokens.data()),
                                                 tokens.size() * sizeof(int64_t));
  call.inputs.push_back({"tokens", "INT64", {rows, length}, bytes});
  return call;
}

class ServedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServedModelOptions options;
    options.config = &model_;
    options.instances = {&backend_};
    options.state = &state_;
    options.metrics = &metrics_;
    options.clock = &clock_;
    absl::StatusOr<std::unique_ptr<ServedModel>> served = ServedModel::Create(options);
    ASSERT_TRUE(served.ok()) << served.status();
    served_ = *std::move(served);
    state_.SetReady();
  }
  void TearDown() override {
    backend_.Release();
    served_.reset();  // stops the scheduler: every accepted row is answered before the backend goes
  }

  // Submits a call and returns its answers.
  std::shared_ptr<Answers> Infer(absl::StatusOr<InferCall> call, InferHandle* handle = nullptr) {
    std::shared_ptr<Answers> answers = Answers::Make();
    InferHandle h = served_->Infer(std::move(call), Answers::For(answers));
    if (handle != nullptr) *handle = h;
    return answers;
  }
  // A one-row call that is running, held inside the backend, when this returns.
  std::shared_ptr<Answers> OccupyInstance() {
    backend_.Hold();
    const int before = backend_.batches();
    std::shared_ptr<Answers> blocker = Infer(TokensCall(1, 1, /*base=*/900));
    EXPECT_TRUE(backend_.WaitForBatches(before + 1));
    EXPECT_EQ(served_->scheduler().QueueDepth(), 0);
    return blocker;
  }
  // Stops the scheduler: afterwards no completion can still come.
  void FinishEverything() {
    backend_.Release();
    served_->scheduler().Stop();
  }
  double Requests(const char* outcome) {
    auto samples = testing::ParseSamples(metrics_.Render(absl::Now()));
    return samples[std::string("sluice_requests_total{model=\"echo\",outcome=\"") + outcome + "\"}"];
  }

  ModelConfig model_ = EchoModel();
  FakeClock clock_;
  ServingState state_;
  ServerMetrics metrics_{absl::Now(), std::nullopt};
  EchoBackend backend_{model_};
  std::unique_ptr<ServedModel> served_;
};

TEST_F(ServedModelTest, AValidCallCompletesOnceWithRowsStackedInRowOrderAndOutputsInRequestOrder) {
  InferCall call = TokensCall(3, 2);
  call.requested_outputs = {"doubled", "first_token"};
  call.parameters = {{"binary_data_output", true}, {"priority", int64_t{1}}};
  std::shared_ptr<Answers> answers = Infer(std::move(call));
  ASSERT_TRUE(answers->WaitForOne());
  FinishEverything();
  ASSERT_EQ(answers->count(), 1u);
  EXPECT_NE(answers->thread(), std::this_thread::get_id()) << "answered from a scheduler thread";
  absl::StatusOr<InferResult> result = answers->first();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 2u);
  EXPECT_EQ(result->outputs[0].spec->name, "doubled");
  EXPECT_THAT(result->outputs[0].tensor.shape, ElementsAre(3, 2));
  EXPECT_THAT(result->outputs[0].tensor.values<int64_t>(), ElementsAre(200, 202, 220, 222, 240, 242));
  EXPECT_EQ(result->outputs[1].spec->name, "first_token");
  EXPECT_THAT(result->outputs[1].tensor.shape, ElementsAre(3, 1));
  EXPECT_THAT(result->outputs[1].tensor.values<int64_t>(), ElementsAre(100, 110, 120));
  EXPECT_EQ(result->options.binary_data_output, std::optional<bool>(true));
  EXPECT_EQ(result->options.priority, 1);

  const ModelStatsSnapshot stats = served_->stats().Snapshot();
  EXPECT_EQ(stats.inference_count, 3u);
  EXPECT_EQ(stats.fail.count, 0u);
  EXPECT_EQ(Requests("ok"), 1);
}

TEST_F(ServedModelTest, NoRequestedOutputsAnswersEveryOutputInDeclarationOrder) {
  std::shared_ptr<Answers> answers = Infer(TokensCall(1, 3));
  ASSERT_TRUE(answers->WaitForOne());
  absl::StatusOr<InferResult> result = answers->first();
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(result->outputs.size(), 2u);
  EXPECT_EQ(result->outputs[0].spec->name, "first_token");
  EXPECT_EQ(result->outputs[1].spec->name, "doubled");
  EXPECT_THAT(result->outputs[1].tensor.shape, ElementsAre(1, 3));
}

TEST_F(ServedModelTest, AnInvalidCallCompletesOnceOnTheCallersThreadAndIsCountedOnce) {
  // Each call is built where it is used: an InferCall's inputs view its own storage, so it may be moved but
  // never copied (a std::vector of calls would copy them when it grows).
  struct Case {
    const char* what;
    std::function<InferCall()> make;
    const char* message;
  };
  const Case cases[] = {
      {"token out of range", [] { return TokensCall(1, 2, /*base=*/1000); }, "outside the model's range [0, 999]"},
      {"too many rows", [] { return TokensCall(5, 1); }, "max batch size 4"},
      {"priority 2^32+1",
       [] {
         InferCall call = TokensCall(1, 1);
         call.parameters = {{"priority", (uint64_t{1} << 32) + 1}};
         return call;
       },
       "from 0 to 3"},
      {"unknown output",
       [] {
         InferCall call = TokensCall(1, 1);
         call.requested_outputs = {"nope"};
         return call;
       },
       "unknown output 'nope'"},
  };
  uint64_t refused = 0;
  for (const Case& c : cases) {
    std::shared_ptr<Answers> answers = Infer(c.make());
    ASSERT_EQ(answers->count(), 1u) << c.what << ": answered before Infer returned";
    EXPECT_EQ(answers->thread(), std::this_thread::get_id()) << c.what;
    EXPECT_EQ(answers->first().status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_THAT(answers->first().status().message(), HasSubstr(c.message)) << c.what;
    ++refused;
    EXPECT_EQ(served_->stats().Snapshot().fail.count, refused) << c.what << ": counted once";
  }
  FinishEverything();
  EXPECT_EQ(Requests("invalid"), static_cast<double>(refused));
  EXPECT_EQ(served_->stats().Snapshot().inference_count, 0u);
  EXPECT_EQ(backend_.batches(), 0) << "nothing invalid reaches the backend";
}

TEST_F(ServedModelTest, ADecodeErrorIsAnsweredAsItIsAndCountedOnce) {
  InferHandle handle;
  std::shared_ptr<Answers> answers = Infer(absl::InvalidArgumentError("malformed JSON at offset 3"), &handle);
  ASSERT_EQ(answers->count(), 1u);
  EXPECT_EQ(answers->thread(), std::this_thread::get_id());
  EXPECT_EQ(answers->first().status(), absl::InvalidArgumentError("malformed JSON at offset 3"));
  handle.Cancel();  // an empty handle: nothing to withdraw
  FinishEverything();
  EXPECT_EQ(answers->count(), 1u);
  EXPECT_EQ(served_->stats().Snapshot().fail.count, 1u);
  EXPECT_EQ(Requests("invalid"), 1);
}

TEST_F(ServedModelTest, WhileDrainingEveryCallIsRefusedAsUnavailable) {
  state_.BeginDrain();
  EXPECT_FALSE(state_.ready());
  std::shared_ptr<Answers> answers = Infer(TokensCall(1, 1));
  ASSERT_EQ(answers->count(), 1u);
  EXPECT_EQ(answers->thread(), std::this_thread::get_id());
  EXPECT_EQ(answers->first().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(answers->first().status().message(), HasSubstr("draining"));
  FinishEverything();
  EXPECT_EQ(backend_.batches(), 0);
  EXPECT_EQ(served_->stats().Snapshot().fail.count, 1u);
  EXPECT_EQ(Requests("rejected"), 1);
}

TEST_F(ServedModelTest, WhileDrainingACallContinuingAnAdmittedOneIsServedAndTheDrainWaitsForTheAdmission) {
  AdmittedCall admitted = state_.Admit();
  ASSERT_TRUE(admitted);
  state_.BeginDrain();
  EXPECT_FALSE(state_.Admit());  // a new long call is refused from now on
  InferCall continuing = TokensCall(2, 1);
  continuing.continues_admitted = true;
  std::shared_ptr<Answers> answers = Infer(std::move(continuing));
  ASSERT_TRUE(answers->WaitForOne());
  EXPECT_TRUE(answers->first().ok()) << answers->first().status();
  EXPECT_EQ(Infer(TokensCall(1, 1))->first().status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(state_.admitted_calls(), 1);
  std::thread waiter([&] { state_.WaitForAdmittedCalls(); });
  admitted = AdmittedCall();  // given back: the waiter returns
  waiter.join();
  EXPECT_EQ(state_.admitted_calls(), 0);
  FinishEverything();
}

TEST_F(ServedModelTest, ACallWhoseFirstRowFindsTheQueueFullIsRefusedWhole) {
  std::shared_ptr<Answers> blocker = OccupyInstance();
  std::shared_ptr<Answers> filler = Infer(TokensCall(3, 1));  // max_queue_size 3
  ASSERT_EQ(served_->scheduler().QueueDepth(), 3);
  std::shared_ptr<Answers> refused = Infer(TokensCall(1, 1));
  ASSERT_EQ(refused->count(), 1u);
  EXPECT_EQ(refused->thread(), std::this_thread::get_id());
  EXPECT_EQ(refused->first().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused->first().status().message(), HasSubstr("queue is full (max_queue_size 3)"));
  EXPECT_EQ(served_->stats().Snapshot().fail.count, 1u);
  FinishEverything();
  EXPECT_TRUE(blocker->first().ok());
  EXPECT_TRUE(filler->first().ok());
  EXPECT_EQ(refused->count(), 1u);
  EXPECT_EQ(Requests("rejected"), 1);
  EXPECT_EQ(Requests("ok"), 2);
}

TEST_F(ServedModelTest, APartlyQueuedCallAnswersResourceExhaustedOnceAfterItsQueuedRowsAreWithdrawn) {
  std::shared_ptr<Answers> blocker = OccupyInstance();
  // Four rows, room for three: rows 0..2 queue, row 3 is refused, rows 0..2 are withdrawn.
  std::shared_ptr<Answers> partial = Infer(TokensCall(4, 1));
  ASSERT_EQ(partial->count(), 1u) << "the withdrawn rows answer on this thread, so the call is answered now";
  EXPECT_EQ(partial->thread(), std::this_thread::get_id());
  EXPECT_EQ(partial->first().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(partial->first().status().message(), HasSubstr("queue is full"));
  EXPECT_EQ(served_->scheduler().QueueDepth(), 0) << "no row of the refused call is left queued";
  EXPECT_EQ(served_->scheduler().InFlight(), 1) << "only the blocker";

  FinishEverything();
  EXPECT_EQ(partial->count(), 1u);
  ASSERT_EQ(blocker->count(), 1u);
  EXPECT_TRUE(blocker->first().ok()) << blocker->first().status();
  EXPECT_THAT(backend_.started_rows(), ElementsAre(900)) << "no row of the refused call ran";
  EXPECT_EQ(Requests("rejected"), 1);
  EXPECT_EQ(Requests("cancelled"), 0);
  EXPECT_EQ(Requests("ok"), 1);
}

TEST_F(ServedModelTest, CancelWithdrawsTheQueuedRowsWhileTheRunningRowFinishes) {
  backend_.Hold();
  InferHandle handle;
  std::shared_ptr<Answers> answers = Infer(TokensCall(2, 1), &handle);
  ASSERT_TRUE(backend_.WaitForBatches(1));  // row 0 runs alone (held); row 1 waits
  ASSERT_EQ(served_->scheduler().QueueDepth(), 1);
  handle.Cancel();
  EXPECT_EQ(served_->scheduler().QueueDepth(), 0);
  EXPECT_EQ(answers->count(), 0u) << "the running row has not answered yet";
  backend_.Release();
  ASSERT_TRUE(answers->WaitForOne());
  FinishEverything();
  ASSERT_EQ(answers->count(), 1u);
  EXPECT_EQ(answers->first().status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(backend_.started_rows(), ElementsAre(100)) << "row 0 ran to the end; row 1 never ran";
  const ModelStatsSnapshot stats = served_->stats().Snapshot();
  EXPECT_EQ(stats.inference_count, 1u) << "the running row succeeded";
  EXPECT_EQ(Requests("cancelled"), 1);
  handle.Cancel();  // after the answer: harmless
  EXPECT_EQ(answers->count(), 1u);
}

TEST_F(ServedModelTest, CancellingAWhollyQueuedCallAnswersCancelledAtOnceAndLeavesOtherCallsAlone) {
  std::shared_ptr<Answers> blocker = OccupyInstance();
  InferHandle handle;
  std::shared_ptr<Answers> queued = Infer(TokensCall(2, 3), &handle);
  ASSERT_EQ(served_->scheduler().QueueDepth(), 2);
  handle.Cancel();
  ASSERT_EQ(queued->count(), 1u) << "withdrawn rows answer on the cancelling thread";
  EXPECT_EQ(queued->thread(), std::this_thread::get_id());
  EXPECT_EQ(queued->first().status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(served_->scheduler().QueueDepth(), 0);
  handle.Cancel();
  FinishEverything();
  EXPECT_EQ(queued->count(), 1u);
  ASSERT_EQ(blocker->count(), 1u);
  EXPECT_TRUE(blocker->first().ok()) << blocker->first().status();
  EXPECT_THAT(backend_.started_rows(), ElementsAre(900));
}

// The `timeout` parameter must be measured on the model's (injected) clock, the one the scheduler expires
// requests by. BUG (server/core/served_model.cc, ServedModel::Prepare): it anchors `timeout` at absl::Now(), not at
// the clock in ServedModelOptions, which ServedModel does not keep — so under a FakeClock the deadline lies
// decades past the scheduler's "now" and the call never expires.
TEST_F(ServedModelTest, TheTimeoutParameterIsMeasuredOnTheModelsClock) {
  std::shared_ptr<Answers> blocker = OccupyInstance();
  InferCall call = TokensCall(1, 1);
  call.parameters = {{"timeout", int64_t{5000}}};  // 5 ms
  std::shared_ptr<Answers> answers = Infer(std::move(call));
  ASSERT_EQ(served_->scheduler().QueueDepth(), 1);
  clock_.Advance(absl::Milliseconds(5));
  ASSERT_TRUE(answers->WaitForOne(absl::Seconds(1))) << "still queued 5 ms (model clock) after a 5 ms timeout";
  EXPECT_EQ(answers->first().status().code(), absl::StatusCode::kDeadlineExceeded);
  FinishEverything();
  EXPECT_EQ(answers->count(), 1u);
  EXPECT_THAT(backend_.started_rows(), ElementsAre(900)) << "the expired call never ran";
}

// ---------------------------------------------------------------------------------------------------------------
// ModelHub

TEST(ModelHubTest, LookupsAnswerUnavailableUntilPublishThenNotFoundForUnknownModelsAndVersions) {
  ModelConfig model = EchoModel();
  FakeClock clock;
  EchoBackend backend(model);
  ModelHub hub;
  absl::StatusOr<ServedModel*> loading = hub.Find("echo", "");
  EXPECT_EQ(loading.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(loading.status().message(), HasSubstr("loading"));
  EXPECT_THAT(hub.models(), IsEmpty());
  EXPECT_FALSE(hub.ready());

  absl::StatusOr<std::unique_ptr<ServedModel>> served =
      ServedModel::Create({&model, {&backend}, &hub.state(), nullptr, &clock});
  ASSERT_TRUE(served.ok()) << served.status();
  ServedModel* raw = served->get();
  std::vector<std::unique_ptr<ServedModel>> models;
  models.push_back(*std::move(served));
  hub.Publish(std::move(models));
  hub.state().SetReady();

  EXPECT_TRUE(hub.ready());
  ASSERT_EQ(hub.models().size(), 1u);
  for (const char* version : {"", "1"}) {
    absl::StatusOr<ServedModel*> found = hub.Find("echo", version);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, raw);
  }
  absl::StatusOr<ServedModel*> version = hub.Find("echo", "2");
  EXPECT_EQ(version.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(version.status().message(), HasSubstr("model 'echo' has no version '2'"));
  absl::StatusOr<ServedModel*> unknown = hub.Find("nope", "");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown model 'nope'"));
  EXPECT_EQ(hub.Find("nope", "1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(hub.InFlight(), 0);

  hub.state().BeginDrain();
  EXPECT_FALSE(hub.ready());
  EXPECT_TRUE(hub.draining());
  hub.StopAll();
}

}  // namespace
}  // namespace sluice
