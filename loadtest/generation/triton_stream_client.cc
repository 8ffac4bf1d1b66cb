#include "loadtest/generation/triton_stream_client.h"

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "loadtest/generation/triton_stream.h"
#include "loadtest/kserve/grpc_infer_client.h"
#include "spdlog/spdlog.h"

namespace sluice::loadtest {

// One request's stream. Reactions run one at a time (one read outstanding; the write is done once), OnDone last;
// Cancel may come from any thread (TryCancel is thread-safe, even before the call starts).
class TritonStreamInferClient::Stream final
    : public grpc::ClientBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  using Clock = std::chrono::steady_clock;

  Stream(TritonStreamInferClient* owner, GenerationSpec spec, std::string id, OutcomeDone done)
      : spec_(std::move(spec)), id_(std::move(id)), done_(std::move(done)), owner_(owner), state_(id_) {}

  absl::Status Prepare(std::chrono::system_clock::time_point deadline, const std::string& bearer_token) {
    context_.set_deadline(deadline);
    if (!bearer_token.empty()) context_.AddMetadata("authorization", "Bearer " + bearer_token);
    return EncodeTritonGenerate(spec_, id_, request_);
  }

  void Start(inference::GRPCInferenceService::Stub& stub) {
    stub.async()->ModelStreamInfer(&context_, this);
    sent_ = Clock::now();
    StartWriteLast(&request_, grpc::WriteOptions());  // the request, and the write side closed with it
    StartRead(&response_);
    StartCall();
  }

  void Cancel() { context_.TryCancel(); }

  void OnWriteDone(bool) override {}  // a failed write ends the reads too; the stream's status says why
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream has ended: its status comes with OnDone
    state_.Feed(response_, std::chrono::duration<double>(Clock::now() - sent_).count());
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override { owner_->Finish(this, status); }  // may delete this

  const GenerationSpec& spec() const { return spec_; }
  const std::string& id() const { return id_; }
  GenerationOutcome TakeOutcome() { return state_.Take(); }
  void RunDone(const Outcome& outcome) { done_(outcome); }

 private:
  const GenerationSpec spec_;
  const std::string id_;
  const OutcomeDone done_;
  TritonStreamInferClient* const owner_;
  grpc::ClientContext context_;
  inference::ModelInferRequest request_;
  inference::ModelStreamInferResponse response_;  // the one read in flight
  TritonStreamState state_;
  Clock::time_point sent_;
};

TritonStreamInferClient::TritonStreamInferClient(const Options& options, const GenerationPlan* plan)
    : InferClient(options), plan_(plan) {
  channels_ = CreateLoadChannels(options);
  for (const auto& channel : channels_) stubs_.push_back(inference::GRPCInferenceService::NewStub(channel));
}

TritonStreamInferClient::~TritonStreamInferClient() {
  CancelAll();
  WaitIdle(absl::Seconds(30));
}

void TritonStreamInferClient::Send(Call request, std::chrono::system_clock::time_point deadline, OutcomeDone done) {
  absl::StatusOr<GenerationSpec> spec = GenerationSpecOfCall(request, plan_);
  auto refused = [](const absl::Status& status) {
    return Outcome::Ended(grpc::StatusCode::INVALID_ARGUMENT, std::string(status.message()));
  };
  if (!spec.ok()) return done(refused(spec.status()));
  auto owned = std::make_shared<Stream>(this, *std::move(spec), request.wire_id(), std::move(done));
  Stream* call = owned.get();
  if (absl::Status s = call->Prepare(deadline, options_.bearer_token); !s.ok()) return call->RunDone(refused(s));
  calls_.Add(std::move(owned));
  call->Start(*stubs_[next_channel_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()]);
}

void TritonStreamInferClient::Finish(Stream* call, const grpc::Status& status) {
  Outcome outcome = Outcome::Ended(status.error_code(), status.error_message());
  if (status.ok()) {
    GenerationOutcome streamed = call->TakeOutcome();
    outcome = GenerationOutcomeToOutcome(streamed, JudgeTritonStream(streamed, call->spec()));
  }
  if (!outcome.ok()) LogFirstError(outcome);
  call->RunDone(outcome);
  calls_.Remove(call);  // freed here, unless CancelAll still holds it
}

void TritonStreamInferClient::LogFirstError(const Outcome& outcome) {
  const int code = outcome.code;
  {
    MutexLock lock(&mu_);
    if (!logged_codes_.insert(code).second) return;
  }
  spdlog::warn("ModelStreamInfer: first {} error: {}", GrpcCodeName(code), outcome.message);
}

void TritonStreamInferClient::CancelAll() {
  // TryCancel is a call into gRPC, so it runs outside the registry's lock (the OnDone it leads to takes it); the
  // shared_ptrs keep each stream alive until then, even when it ends meanwhile.
  for (const std::shared_ptr<Stream>& call : calls_.Snapshot()) call->Cancel();
}

bool TritonStreamInferClient::WaitIdle(absl::Duration timeout) { return calls_.WaitIdle(timeout); }

int64_t TritonStreamInferClient::in_flight() const { return calls_.size(); }

grpc::Status TritonStreamInferClient::ModelMetadata(const std::string& model,
                                                    inference::ModelMetadataResponse* response) {
  const grpc::Status status = CallModelMetadata(*stubs_.front(), options_.bearer_token, model, response);
  if (!status.ok()) return status;
  if (absl::Status s = CheckGenerationMetadata(*response); !s.ok()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, std::string(s.message()));
  }
  return grpc::Status::OK;
}

grpc::Status TritonStreamInferClient::ModelConfig(const std::string& model, inference::ModelConfigResponse* response) {
  return CallModelConfig(*stubs_.front(), options_.bearer_token, model, response);
}

grpc::Status TritonStreamInferClient::ModelStatistics(const std::string& model,
                                                      inference::ModelStatisticsResponse* response) {
  return CallModelStatistics(*stubs_.front(), options_.bearer_token, model, response);
}

}  // namespace sluice::loadtest
