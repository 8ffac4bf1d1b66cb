// OpenAI's POST /v1/audio/transcriptions (registered in the HTTP route table, server/kserve/http_service.cc, through
// HttpServiceOptions::transcriptions) for every voice model, over the Recognizer seam (recognizer.h): the same model
// table, decode admission and voice metrics as Riva Recognize (riva_service.h), so both APIs share one bound.
//
// One call: admitted (ServingState::Admit: the drain waits for it) -> the multipart form parsed (multipart_form.h)
// and its fields decoded (transcription_form.h) -> the model found (empty: the voice default; unknown: 404 naming
// the speech models) -> the audio's size probed from its header (ProbeAudio; raw bytes without a container are
// refused: the form says nothing of their encoding) -> decoded and resampled on the DecodeExecutor (always: the HTTP
// threads run the event loop and must not decode; admission refusals are 429 with Retry-After) -> the model's
// Recognizer -> the answer in the asked response_format (transcription_format.h). Errors are OpenAI's error object
// with the status table's HTTP status; `timestamp_granularities[]=word` on a recognizer without word times is 400
// naming it (known only once the recognition has run). A client that goes away takes its waiting decode back or
// cancels its recognition. Metrics: the voice series with api="openai" (voice_metrics.h).
//
// Thread-safety: Serve runs on an HTTP event-loop thread and never waits; a call then lives on a DecodeExecutor
// thread and the recognizer's threads, its state under one leaf mutex per call (never held while calling the
// recognizer, the executor or the exchange). REQUIRES: the hub, models, metrics and executor outlive every call:
// the server stops the HTTP listener, waits for the decodes and stops the schedulers before they go.
#pragma once

#include <memory>

#include "server/http/http_exchange.h"
#include "server/hub/model_hub.h"
#include "server/voice/decode_executor.h"
#include "server/voice/voice_metrics.h"
#include "server/voice/voice_models.h"

namespace sluice::voice {

class OpenAiTranscriptions {
 public:
  OpenAiTranscriptions(ModelHub* hub, VoiceModels* models, VoiceMetrics* metrics, DecodeExecutor* decodes)
      : hub_(hub), models_(models), metrics_(metrics), decodes_(decodes) {}
  OpenAiTranscriptions(const OpenAiTranscriptions&) = delete;
  OpenAiTranscriptions& operator=(const OpenAiTranscriptions&) = delete;

  // Takes the request's body (moved out: an upload may be tens of MiB) and answers through `exchange`.
  void Serve(HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange) const;

 private:
  ModelHub* const hub_;
  VoiceModels* const models_;
  VoiceMetrics* const metrics_;
  DecodeExecutor* const decodes_;
};

}  // namespace sluice::voice
