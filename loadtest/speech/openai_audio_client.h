// The runner's client (LoadClient, core/load_client.h) over OpenAI's POST /v1/audio/transcriptions (--api
// openai-audio), beside riva-offline's: a call's FP32 audio (its first input's raw bytes, one recording at the
// model's rate) is sent as a 16-bit PCM WAV file in a multipart/form-data body, with `model` = the call's model and
// `response_format` json; the Outcome's transcript is the answer's "text". HTTP errors map to gRPC codes through
// the shared status table (backend/base/status_mapping.h), with OpenAI's error message. Calls run on an
// HttpWorkerPool of its own (a connection and thread per call in flight).
// Thread-safety: thread-safe. Callbacks run on worker threads (or, for a call refused before sending, on the
// caller's) and must be short.
// REQUIRES: the client outlives every call it sent (the pool's destructor cancels and waits for them).
#pragma once

#include <chrono>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "loadtest/http/http_worker_pool.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {

// The multipart/form-data body of one transcription request, and its Content-Type (with the boundary).
struct TranscriptionForm {
  std::string content_type;
  std::string body;
};
TranscriptionForm EncodeTranscriptionForm(const std::string& model, const std::string& wav);
// The "text" of a json answer; DataLoss naming what is wrong otherwise.
absl::StatusOr<std::string> DecodeTranscriptionText(const std::string& body);

class OpenAiAudioClient final : public LoadClient {
 public:
  // `sample_rates`: model name -> the rate its samples are at (the WAV header's rate).
  // `options`: the HTTP address (host:port), connections and bearer token.
  OpenAiAudioClient(const ClientOptions& options, absl::flat_hash_map<std::string, int> sample_rates);
  ~OpenAiAudioClient() override = default;

  void Send(Call call, std::chrono::system_clock::time_point deadline, OutcomeDone done) override;
  void CancelAll() override { pool_.CancelAll(); }
  bool WaitIdle(absl::Duration timeout) override { return pool_.WaitIdle(timeout); }
  int64_t in_flight() const override { return pool_.in_flight(); }

 private:
  Outcome Execute(httplib::Client& client, const HttpWorkerPool::Job& job, uint64_t epoch);

  const ClientOptions options_;
  const absl::flat_hash_map<std::string, int> sample_rates_;
  HttpWorkerPool pool_;  // last: destroyed (its workers, which call Execute, stopped) first
};

}  // namespace sluice::loadtest
