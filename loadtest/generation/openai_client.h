// InferClient over the OpenAI-compatible streaming API (--api openai): each call is one POST /v1/completions (or
// /v1/chat/completions) with stream: true, read as Server-Sent Events as they arrive (cpp-httplib's content
// receiver), on an HttpWorkerPool of its own (http/http_worker_pool.h: a connection and thread per call in flight,
// CancelAll shutting the sockets), as the KServe REST client (kserve/http_infer_client.h) has another. The request
// is a GenerationSpec carried in the Call (generation_call.h); the callback's Outcome carries the streamed result in
// `generation` (text, the arrival time of every content chunk, usage), and its code is the stream's verdict
// (JudgeStream: an error event's code, UNAVAILABLE for a stream cut short, USAGE_MISMATCH when usage disagrees with
// the stream or the request). HTTP errors before the stream map to gRPC codes.
// With a GenerationPlan, a workload call (workload.h; its id the index) becomes the plan's request for that
// index, its drawn prompt ids standing for the prompt length. ModelMetadata answers from GET /v1/models (whether the
// model is listed); config and statistics are not part of this API (UNIMPLEMENTED).
// Thread-safety: thread-safe. Callbacks run on worker threads and must be short; they may call Send().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/generation/generation_plan.h"
#include "loadtest/http/http_worker_pool.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

class OpenAiInferClient final : public InferClient {
 public:
  // REQUIRES: `plan` (may be null) outlives the client.
  OpenAiInferClient(const Options& options, const GenerationPlan* plan);
  // The pool's destructor cancels the calls in flight, waits for them and stops its workers.
  ~OpenAiInferClient() override = default;

  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override {
    pool_.Send(std::move(call), deadline, std::move(done));
  }
  void CancelAll() override { pool_.CancelAll(); }
  bool WaitIdle(absl::Duration timeout) override { return pool_.WaitIdle(timeout); }
  int64_t in_flight() const override { return pool_.in_flight(); }

  grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) override;
  grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) override;
  grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) override;

 private:
  // One streamed completion on a worker's connection (the pool's Execute).
  Outcome Execute(httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch);

  const GenerationPlan* const plan_;
  HttpWorkerPool pool_;  // last: destroyed (its workers, which call Execute, stopped) first
};

// One model of GET /v1/models, with the limits sluice-server adds to OpenAI's fields (0: not given).
struct OpenAiModelEntry {
  std::string id;
  int64_t max_model_len = 0;      // prompt + output tokens of one sequence
  int64_t vocab_size = 0;         // token ids in [0, vocab_size)
  int64_t max_prompt_tokens = 0;  // the largest prompt bucket
};

// GET /v1/models from `address` (host:port): the models listed.
absl::StatusOr<std::vector<OpenAiModelEntry>> ListOpenAiModels(const std::string& address,
                                                               const std::string& bearer_token);
// `model` among them: UNAVAILABLE when the list cannot be read, NOT_FOUND (naming those listed) when it is not there.
absl::StatusOr<OpenAiModelEntry> DescribeOpenAiModel(const std::string& address, const std::string& bearer_token,
                                                     const std::string& model);

}  // namespace sluice::loadtest
