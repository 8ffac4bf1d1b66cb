// The Riva speech APIs' driver (core/api_driver.h): --api riva-offline (Recognize, one WAV file per request,
// through the runner) and riva-streaming (StreamingRecognize, --streams streams of chunked PCM); SpeechLoad
// (speech_load.h) runs them. Models are described and verified over KServe v2 on the same server.
// Thread-safety: as ApiDriver.
#pragma once

#include <memory>

#include "loadtest/core/api_driver.h"

namespace sluice::loadtest {

// REQUIRES: IsSpeechApi(api).
std::unique_ptr<ApiDriver> MakeSpeechDriver(Api api);

}  // namespace sluice::loadtest
