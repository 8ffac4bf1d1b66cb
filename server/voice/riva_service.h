// NVIDIA Riva's speech-recognition gRPC API (nvidia.riva.asr.RivaSpeechRecognition, proto/riva/proto/) on the
// server's gRPC port, beside KServe v2: Recognize (whole recordings, long ones windowed), StreamingRecognize
// (live audio; streaming_session.h) and GetRivaSpeechRecognitionConfig. Handlers decode the audio
// (audio_decode.h), run it through the chosen speech model (voice_models.h) and encode transcripts.
// Thread-safety: gRPC calls handlers concurrently; the service's own state is VoiceModels (thread-safe).
#pragma once

#include <string>

#include "riva/proto/riva_asr.grpc.pb.h"
#include "server/model_hub.h"
#include "server/voice/voice_metrics.h"
#include "server/voice/voice_models.h"

namespace sluice::voice {

class RivaAsrService final : public nvidia::riva::asr::RivaSpeechRecognition::CallbackService {
 public:
  // `hub` must outlive the service. Empty `bearer_token`: no authorization check.
  RivaAsrService(ModelHub* hub, std::string bearer_token);

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
  VoiceModels models_;
  VoiceMetrics metrics_;
};

}  // namespace sluice::voice
