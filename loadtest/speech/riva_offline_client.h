// The runner's client (LoadClient, core/load_client.h) over Riva's Recognize (--api riva-offline), so that the
// runner's closed and open loops, caps and summaries drive the speech API unchanged: a call's FP32 audio (its first
// input's raw bytes, the samples of one recording at the model's rate) is sent as one 16-bit PCM WAV file
// (encoding LINEAR_PCM, as Riva's own client sends files), RecognitionConfig.model = the call's model. The
// Outcome's transcript is the results' transcripts joined by spaces. Metadata, config and statistics are not
// this client's: app.cc's KServe client asks them (sluice serves KServe v2 on the same port).
// Thread-safety: thread-safe. Callbacks run on gRPC's threads (or, for a call refused before sending, on the
// caller's) and must be short.
// REQUIRES: the client outlives every call it sent (the destructor cancels and waits for them).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "loadtest/core/call_registry.h"
#include "loadtest/core/load_client.h"
#include "loadtest/kserve/infer_client.h"
#include "riva/proto/riva_asr.grpc.pb.h"

namespace sluice::loadtest {

class RivaOfflineClient final : public LoadClient {
 public:
  // `sample_rates`: model name -> the rate its samples are at (the WAV header's rate).
  // `options`: address, channels and bearer token (gRPC).
  RivaOfflineClient(const ClientOptions& options, absl::flat_hash_map<std::string, int> sample_rates);
  ~RivaOfflineClient() override;

  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override;
  void CancelAll() override;
  bool WaitIdle(absl::Duration timeout) override;
  int64_t in_flight() const override;

 private:
  struct InFlight;
  void Finish(InFlight* call, const grpc::Status& status);

  const ClientOptions options_;
  const absl::flat_hash_map<std::string, int> sample_rates_;
  std::vector<std::unique_ptr<nvidia::riva::asr::RivaSpeechRecognition::Stub>> stubs_;
  std::atomic<uint64_t> next_channel_{0};

  CallRegistry<InFlight> calls_;  // in flight; CancelAll calls TryCancel outside its lock
};

}  // namespace sluice::loadtest
