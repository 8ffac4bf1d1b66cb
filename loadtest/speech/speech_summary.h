// The speech API's figures of one run (--api riva-offline | riva-streaming; SpeechStats in summary.h), beside
// the request summary (there a request is one Recognize call or one whole stream). Over the measured requests
// that succeeded: audio seconds sent and transcribed, RTFx = those seconds / the measured window's seconds; for
// streams, chunk latency (chunk sent -> first result whose audio_processed reaches its end), final latency
// (WritesDone -> the last final result) and time to first result, nearest-rank percentiles like every other
// latency; and the corpus WER of the final transcripts against the references that exist (wer.h).
// Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "loadtest/core/runner.h"
#include "loadtest/core/summary.h"
#include "loadtest/core/workload.h"
#include "loadtest/speech/stream_call.h"

namespace sluice::loadtest {

// `streams`: riva-streaming's outcomes, aligned with run.records (null for riva-offline). `transcripts`: the
// final transcript by request index (only those with a reference are needed).
SpeechStats SummarizeSpeech(Api api, const RunResult& run, const std::vector<StreamOutcome>* streams,
                            const absl::flat_hash_map<uint64_t, std::string>& transcripts, const Workload& workload);

}  // namespace sluice::loadtest
