// The runner's client (LoadClient, core/load_client.h; an InferClient for the control calls) over Triton's
// ModelStreamInfer for text-generation models (--api triton-stream), with gRPC's callback
// API: each call is one bidirectional stream (a ClientBidiReactor on the next channel, round robin) that writes one
// request with the write side closed at once (WriteLast), reads every response until the server ends the stream,
// and ends with the stream's status. Several requests could share one stream (the protocol allows it); one stream
// per request keeps cancellation and deadlines per request, as the runner's calls are. The request is a
// GenerationSpec carried in the Call (generation_call.h), sent as triton_stream.h describes; the callback's
// Outcome carries the streamed result in `generation` (text, the arrival time of every text response, token
// counts), and its code is the stream's verdict (JudgeTritonStream: an error response's code, UNAVAILABLE for a stream
// without a final response, USAGE_MISMATCH) or the stream's own non-OK status (DEADLINE_EXCEEDED at the call's
// deadline, CANCELLED by CancelAll, UNAVAILABLE, ...). The first message of each error code is logged.
// With a GenerationPlan, a workload call (workload.h; its id the index) becomes the plan's request for that
// index, its drawn prompt ids standing for the prompt length. ModelMetadata, ModelConfig and ModelStatistics are
// the KServe v2 unary calls; ModelMetadata also checks that the model is a text-generation model
// (FAILED_PRECONDITION otherwise).
// Thread-safety: thread-safe. Callbacks run on gRPC's threads and must be short; they may call Send().
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "grpc_service.grpc.pb.h"
#include "loadtest/generation/generation_plan.h"
#include "loadtest/core/call_registry.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

class TritonStreamInferClient final : public InferClient {
 public:
  // REQUIRES: options.address is host:port; `plan` (may be null) outlives the client.
  TritonStreamInferClient(const Options& options, const GenerationPlan* plan);
  // Cancels the streams in flight and waits (up to 30 s) for them to end.
  ~TritonStreamInferClient() override;

  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override;
  void CancelAll() override;
  bool WaitIdle(absl::Duration timeout) override;
  int64_t in_flight() const override;

  grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) override;
  grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) override;
  grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) override;

 private:
  class Stream;
  // The stream of `call` has ended with `status`: runs its callback and forgets it.
  void Finish(Stream* call, const grpc::Status& status);
  void LogFirstError(const Outcome& outcome);

  const GenerationPlan* const plan_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<inference::GRPCInferenceService::Stub>> stubs_;
  std::atomic<uint64_t> next_channel_{0};

  CallRegistry<Stream> calls_;  // streams in flight; CancelAll cancels them outside its lock
  Mutex mu_;                  // never held while calling into gRPC or a caller's callback
  absl::flat_hash_set<int> logged_codes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sluice::loadtest
