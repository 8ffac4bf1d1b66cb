// InferClient over the OpenAI-compatible streaming API (--api openai): each call is one POST /v1/completions (or
// /v1/chat/completions) with stream: true, read as Server-Sent Events as they arrive (cpp-httplib's content
// receiver), on HttpInferClient's worker pool (a connection and thread per call in flight, CancelAll shutting the
// sockets). The request is a GenerationSpec carried in the ModelInferRequest (openai_stream.h); the callback's
// response carries the streamed outcome (text, the arrival time of every content chunk, usage), and its status is
// the stream's verdict (JudgeStream: an error event's code, UNAVAILABLE for a stream cut short, USAGE_MISMATCH
// when usage disagrees with the stream or the request). HTTP errors before the stream map to gRPC codes.
// With a GenerationPlan, a request whose id is a workload index (workload.h) becomes the plan's request for that
// index, its drawn prompt ids standing for the prompt length. ModelMetadata answers from GET /v1/models (whether the model is listed); config and statistics are not part of
// this API (UNIMPLEMENTED).
// Thread-safety: as HttpInferClient.
#pragma once

#include "loadtest/generation_plan.h"
#include "loadtest/http_infer_client.h"

namespace sluice::loadtest {

class OpenAiInferClient final : public HttpInferClient {
 public:
  // REQUIRES: `plan` (may be null) outlives the client.
  OpenAiInferClient(const Options& options, const GenerationPlan* plan) : HttpInferClient(options), plan_(plan) {}
  // Drains the calls in flight before the base class's destructor (its workers call Execute).
  ~OpenAiInferClient() override;

  grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) override;
  grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) override;
  grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) override;

 protected:
  grpc::Status Execute(httplib::Client& client, const Job& job, uint64_t epoch,
                       inference::ModelInferResponse* response) override;

 private:
  const GenerationPlan* const plan_;
};

// GET /v1/models from `address` (host:port): the model ids listed.
absl::StatusOr<std::vector<std::string>> ListOpenAiModels(const std::string& address, const std::string& bearer_token);

}  // namespace sluice::loadtest
