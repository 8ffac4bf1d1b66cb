// The load of the speech APIs (--api riva-offline | riva-streaming | openai-audio) over a workload of speech models:
// riva-offline and openai-audio run the ordinary runner (closed or open loop) through a RivaOfflineClient or an
// OpenAiAudioClient (HTTP: the client options' address is the server's HTTP port) and collect the
// transcripts of the requests that have references; riva-streaming runs RunStreams. Either way one run gives
// the request records (for the ordinary summary, timeline and histogram) and the speech figures.
// For the Riva APIs, Create() asks the server's GetRivaSpeechRecognitionConfig whether it serves each model over the
// Riva API, so that a model without a `speech:` section fails before any load with the server's reason.
// Thread-safety: Run() blocks its calling thread and is not reentrant.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "loadtest/core/api.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/summary.h"
#include "loadtest/core/workload.h"
#include "loadtest/kserve/infer_client.h"
#include "loadtest/speech/stream_runner.h"

namespace sluice::loadtest {

struct SpeechLoadOptions {
  Api api = Api::kRivaOffline;  // riva-offline | riva-streaming | openai-audio
  StreamingOptions streaming;
  ClientOptions client;  // address, channels, bearer token (gRPC)
};

struct SpeechRun {
  RunResult run;
  SpeechStats speech;
};

class SpeechLoad {
 public:
  // REQUIRES: `workload` outlives this.
  static absl::StatusOr<std::unique_ptr<SpeechLoad>> Create(const SpeechLoadOptions& options,
                                                            const Workload& workload);

  // One run. riva-offline: `run` as for any API. riva-streaming: `streams` > 0 replaces options.streaming.streams
  // (a sweep step).
  absl::StatusOr<SpeechRun> Run(const RunOptions& run, int streams = 0);

  SpeechLoad(const SpeechLoad&) = delete;
  SpeechLoad& operator=(const SpeechLoad&) = delete;

 private:
  SpeechLoad(const SpeechLoadOptions& options, const Workload& workload) : options_(options), workload_(workload) {}

  absl::StatusOr<SpeechRun> RunOffline(const RunOptions& run);
  absl::StatusOr<SpeechRun> RunStreaming(const RunOptions& run, int streams);

  const SpeechLoadOptions options_;
  const Workload& workload_;
  std::unique_ptr<LoadClient> offline_client_;  // riva-offline, openai-audio
};

}  // namespace sluice::loadtest
