// The scheduler end to end on the real asr_ctc graphs: many concurrent requests of different lengths, batched
// into real buckets by two CPU instances; every answer must equal the model run alone on the unpadded input.
#include <gtest/gtest.h>

#include <thread>

#include "backend/model_repository.h"
#include "backend/reference_set.h"
#include "scheduler/dynamic_batcher.h"
#include "tests/backend/test_models.h"
#include "tests/scheduler/scheduler_test_util.h"

namespace sluice {
namespace {

TEST(SchedulerEndToEndTest, ConcurrentRequestsOfRandomLengthsMatchTheUnpaddedReference) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(testing::ExampleModelDir("asr_ctc"));
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::vector<ReferenceCase>> cases = LoadReferenceSet(testing::ExampleModelDir("asr_ctc"));
  ASSERT_TRUE(cases.ok()) << cases.status();
  std::vector<std::unique_ptr<Backend>> instances;
  std::vector<Backend*> raw;
  for (int i = 0; i < 2; ++i) {
    auto instance = Backend::Create({&*config, {1, DeviceKind::kCpu, std::nullopt, 1}, i, 1});
    ASSERT_TRUE(instance.ok()) << instance.status();
    instances.push_back(std::move(*instance));
    raw.push_back(instances.back().get());
  }
  auto scheduler = CreateDynamicBatcher({&*config, raw});
  ASSERT_TRUE(scheduler.ok()) << scheduler.status();

  constexpr int kClients = 4;
  constexpr int kPerClient = 12;
  std::vector<std::vector<std::pair<const ReferenceCase*, std::shared_ptr<testing::PendingAnswer>>>> sent(kClients);
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kPerClient; ++i) {
        const ReferenceCase& ref = (*cases)[(c * 5 + i * 7) % cases->size()];
        auto answer = std::make_shared<testing::PendingAnswer>();
        InferRequest request;
        request.inputs = ref.inputs;
        request.length = ref.length();
        request.on_done = [answer](InferResponse r) {
          answer->response = std::move(r);
          answer->done.Notify();
        };
        absl::StatusOr<RequestId> id = (*scheduler)->Enqueue(std::move(request));
        ASSERT_TRUE(id.ok()) << id.status();
        sent[c].emplace_back(&ref, answer);
      }
    });
  }
  for (auto& t : clients) t.join();
  int batched_rows = 0;
  for (auto& per_client : sent) {
    for (auto& [ref, answer] : per_client) {
      ASSERT_TRUE(answer->done.WaitForNotificationWithTimeout(absl::Seconds(120)));
      const InferResponse& r = answer->response;
      ASSERT_TRUE(r.status.ok()) << r.status;
      const HostTensor& want = ref->outputs[0];
      ASSERT_EQ(r.outputs[0].shape, want.shape) << "length " << ref->length();
      float max_diff = 0;
      for (size_t i = 0; i < want.values<float>().size(); ++i) {
        max_diff = std::max(max_diff, std::abs(r.outputs[0].values<float>()[i] - want.values<float>()[i]));
      }
      EXPECT_LE(max_diff, 1e-4f) << "length " << ref->length() << " in batch " << r.batch_size << " bucket "
                                 << r.bucket_length;
      batched_rows += r.batch_rows_used > 1;
    }
  }
  (*scheduler)->Stop();
  EXPECT_GT(batched_rows, 0) << "no request shared a batch: dynamic batching never happened";
}

}  // namespace
}  // namespace sluice
