// NVIDIA Riva's speech-recognition gRPC API (nvidia.riva.asr.RivaSpeechRecognition, proto/riva/proto/) on the
// server's gRPC port, beside KServe v2: Recognize (whole recordings, long ones windowed), StreamingRecognize
// (live audio; streaming_session.h) and GetRivaSpeechRecognitionConfig. Handlers check the audio's size from its
// byte count or header (audio_decode.h: ProbeAudio) and refuse before decoding; the decoding and resampling of
// a file (and of a large stream chunk) runs on the DecodeExecutor (decode_executor.h), never on a gRPC thread,
// except for audio whose decode holds at most kInlineDecodeBytes (a few seconds, cheaper than the hand-off). The
// audio then runs through the chosen speech model (voice_models.h) and transcripts are encoded.
// Thread-safety: gRPC calls handlers concurrently; the service's own state is VoiceModels and the DecodeExecutor
// (both thread-safe).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "backend/base/server_config.h"
#include "riva/proto/riva_asr.grpc.pb.h"
#include "server/hub/model_hub.h"
#include "server/voice/decode_executor.h"
#include "server/voice/riva_streaming.h"
#include "server/voice/stream_engines.h"
#include "server/voice/voice_metrics.h"
#include "server/voice/voice_models.h"

namespace sluice::voice {

class RivaAsrService final : public nvidia::riva::asr::RivaSpeechRecognition::CallbackService {
 public:
  // Audio whose decode holds at most this (DecodePeakBytes) is decoded on the gRPC thread: 1 MiB is 16 s at
  // 16 kHz, a few milliseconds of work.
  static constexpr int64_t kInlineDecodeBytes = kStreamInlineDecodeBytes;

  // `hub` must outlive the service. Empty `bearer_token`: no authorization check.
  RivaAsrService(ModelHub* hub, std::string bearer_token, const VoiceConfig& config = {});
  // After the gRPC server serving it has shut down (every call's OnDone has run).
  ~RivaAsrService() override;
  // Once the models are published: InvalidArgument (at voice.default_model's place in the config file) unless
  // the configured default names a served speech model.
  absl::Status CheckDefaultModel();
  // Waits until no decode runs (after the gRPC server has shut down, before the models go).
  void WaitForDecodes() { decodes_.WaitIdle(); }
  // What OpenAI's /v1/audio/transcriptions shares with Recognize (openai_transcriptions.h): one model table, one
  // decode admission bound, one set of voice metrics. Thread-safe objects; they live as long as the service.
  VoiceModels* models() { return &models_; }
  VoiceMetrics* metrics() { return &metrics_; }
  DecodeExecutor* decodes() { return &decodes_; }
  // The cache-aware models' stream engines: the server publishes them with its models (StreamingRecognize).
  StreamEngines& stream_engines() { return stream_engines_; }

  grpc::ServerUnaryReactor* Recognize(grpc::CallbackServerContext* context,
                                      const nvidia::riva::asr::RecognizeRequest* request,
                                      nvidia::riva::asr::RecognizeResponse* response) override;
  grpc::ServerBidiReactor<nvidia::riva::asr::StreamingRecognizeRequest, nvidia::riva::asr::StreamingRecognizeResponse>*
  StreamingRecognize(grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetRivaSpeechRecognitionConfig(
      grpc::CallbackServerContext* context, const nvidia::riva::asr::RivaSpeechRecognitionConfigRequest* request,
      nvidia::riva::asr::RivaSpeechRecognitionConfigResponse* response) override;

 private:
  ModelHub* const hub_;
  const std::string bearer_token_;
  const VoiceConfig config_;
  VoiceModels models_;
  VoiceMetrics metrics_;
  StreamEngines stream_engines_;
  WindowTickers window_tickers_;  // made on each windowed model's first stream; their threads join with the service
  DecodeExecutor decodes_;
};

}  // namespace sluice::voice
