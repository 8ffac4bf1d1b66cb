// The APIs sluice-loadtest speaks, parsed once from --api: every other place asks the enum (or the API's driver,
// app.cc), never the string. ApiName gives the --api spelling back for the reports.
// Thread-safety: pure functions and constants.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sluice::loadtest {

enum class Api {
  kKServe,         // KServe v2 inference, gRPC or HTTP (kserve/)
  kRivaOffline,    // Riva Recognize, one WAV file per request (speech/)
  kRivaStreaming,  // Riva StreamingRecognize, chunked PCM streams (speech/)
  kOpenAi,         // streamed /v1/completions (or chat) over HTTP (generation/)
  kTritonStream,   // Triton's decoupled ModelStreamInfer over gRPC (generation/)
  kOpenAiAudio,    // OpenAI /v1/audio/transcriptions over HTTP, one WAV file per request (speech/)
};

// Every API's --api spelling, in the enum's order.
const std::vector<std::string>& ApiNames();
absl::string_view ApiName(Api api);
// InvalidArgument naming the accepted spellings when `name` is none of them.
absl::StatusOr<Api> ParseApi(absl::string_view name);

inline bool IsRivaApi(Api api) { return api == Api::kRivaOffline || api == Api::kRivaStreaming; }
// The speech APIs (speech/): Riva's and OpenAI's transcriptions.
inline bool IsSpeechApi(Api api) { return IsRivaApi(api) || api == Api::kOpenAiAudio; }
// One whole recording per request (the ordinary runner): riva-offline and openai-audio.
inline bool IsWholeFileSpeechApi(Api api) { return api == Api::kRivaOffline || api == Api::kOpenAiAudio; }
inline bool IsGenerationApi(Api api) { return api == Api::kOpenAi || api == Api::kTritonStream; }

}  // namespace sluice::loadtest
