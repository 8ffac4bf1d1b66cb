// InferClient over Riva's Recognize (--api riva-offline), so that the runner's closed and open loops, caps and
// summaries drive the speech API unchanged: a call's FP32 audio (its first input's raw contents, the samples of
// one recording at the model's rate) is sent as one 16-bit PCM WAV file (encoding LINEAR_PCM, as Riva's own
// client sends files), RecognitionConfig.model = the call's model name. The answer comes back as a
// ModelInferResponse with one BYTES output "transcript" (KServe's length-prefixed layout) holding the results'
// transcripts joined by spaces; TranscriptOf reads it. Metadata, config and statistics go to `control` (sluice
// serves KServe v2 on the same port).
// Thread-safety: thread-safe. Callbacks run on gRPC's threads (or, for a call refused before sending, on the
// caller's) and must be short.
// REQUIRES: `control` outlives the client; the client outlives every call it sent (the destructor cancels and
// waits for them).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "loadtest/core/call_registry.h"
#include "loadtest/kserve/infer_client.h"
#include "riva/proto/riva_asr.grpc.pb.h"

namespace sluice::loadtest {

class RivaOfflineClient final : public InferClient {
 public:
  // `sample_rates`: model name -> the rate its samples are at (the WAV header's rate).
  RivaOfflineClient(const Options& options, InferClient* control, absl::flat_hash_map<std::string, int> sample_rates);
  ~RivaOfflineClient() override;

  void Send(inference::ModelInferRequest request, std::chrono::system_clock::time_point deadline,
            Done done) override;
  void CancelAll() override;
  bool WaitIdle(absl::Duration timeout) override;
  int64_t in_flight() const override;

  grpc::Status ModelMetadata(const std::string& model, inference::ModelMetadataResponse* response) override {
    return control_->ModelMetadata(model, response);
  }
  grpc::Status ModelConfig(const std::string& model, inference::ModelConfigResponse* response) override {
    return control_->ModelConfig(model, response);
  }
  grpc::Status ModelStatistics(const std::string& model, inference::ModelStatisticsResponse* response) override {
    return control_->ModelStatistics(model, response);
  }

 private:
  struct Call;
  void Finish(Call* call, const grpc::Status& status);

  InferClient* const control_;
  const absl::flat_hash_map<std::string, int> sample_rates_;
  std::vector<std::unique_ptr<nvidia::riva::asr::RivaSpeechRecognition::Stub>> stubs_;
  std::atomic<uint64_t> next_channel_{0};

  CallRegistry<Call> calls_;  // in flight; CancelAll calls TryCancel outside its lock
};

// The "transcript" output of a RivaOfflineClient answer; empty when there is none.
std::string TranscriptOf(const inference::ModelInferResponse& response);

}  // namespace sluice::loadtest
