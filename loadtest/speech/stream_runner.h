// Drives --api riva-streaming: `streams` stream slots, each a closed loop — a slot's next recording (request i
// of the workload, as for any other API) starts when its previous stream has ended. Each stream is a StreamCall
// sending one recording in chunks. Warm-up, the measured duration or stream count and the hard caps mean what
// they mean in the runner (runner.h), with streams for requests: no stream starts after the end, the streams
// in flight then finish (within their deadline: the audio's duration plus the timeout), and past the caps they
// are cancelled. One thread (the caller's) starts streams and wakes streams whose next chunk is due; everything
// else runs on gRPC's callback threads.
// Thread-safety: RunStreams blocks its calling thread.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "loadtest/core/client_options.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/workload.h"
#include "loadtest/speech/stream_call.h"
#include "loadtest/speech/streaming_options.h"

namespace sluice::loadtest {

struct StreamRunResult {
  // One record per stream, in completion order; a stream's latency is its whole duration, audio included.
  RunResult run;
  std::vector<StreamOutcome> streams;  // aligned with run.records
};

// REQUIRES: streaming.streams > 0, chunk_ms > 0; every workload model has a sample rate; duration, requests or
// the caps bound the run. Transcripts are kept for the streams whose recording has a reference.
absl::StatusOr<StreamRunResult> RunStreams(const RunOptions& options, const StreamingOptions& streaming,
                                           const Workload& workload, const ClientOptions& client);

}  // namespace sluice::loadtest
