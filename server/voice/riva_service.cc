#include "server/voice/riva_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "scheduler/sync.h"
#include "server/grpc_service.h"
#include "server/voice/offline_recognition.h"
#include "server/voice/riva_results.h"
#include "server/voice/riva_streaming.h"

namespace sluice::voice {
namespace {

namespace riva = nvidia::riva::asr;

absl::Time DeadlineOf(const grpc::CallbackServerContext* context) {
  return context->deadline() == std::chrono::system_clock::time_point::max() ? absl::InfiniteFuture()
                                                                              : absl::FromChrono(context->deadline());
}

grpc::ServerUnaryReactor* Reply(grpc::CallbackServerContext* context, const grpc::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(status);
  return reactor;
}

// One Recognize call: lives from the handler until gRPC's OnDone; finished exactly once by the recognition's
// completion (a scheduler thread, or the handler's thread when the first window is refused). gRPC calls OnDone
// only after the handler has returned the reactor and after Finish, and the recognition calls Answer (the one
// use of `this` from outside gRPC's reactions) once, before its Finish: so no code runs on a deleted reactor.
// It holds the call's admission until OnDone, so a drain waits for the answer to be sent.
class RecognizeReactor final : public grpc::ServerUnaryReactor {
 public:
  RecognizeReactor(const VoiceModel* voice, VoiceMetrics* metrics, AdmittedCall admitted,
                   const riva::RecognizeRequest* request, riva::RecognizeResponse* response)
      : voice_(voice), metrics_(metrics), admitted_(std::move(admitted)), request_(request), response_(response) {}

  void Start(grpc::CallbackServerContext* context, std::vector<float> audio) {
    const double seconds = static_cast<double>(audio.size()) / voice_->model.sample_rate();
    metrics_->RecordAudio(voice_->model.config(), VoiceApi::kOffline, seconds);
    auto recognition = OfflineRecognition::Start(
        &voice_->model, voice_->decoder.get(), std::move(audio), DeadlineOf(context),
        [this](absl::StatusOr<OfflineResult> result) { Answer(std::move(result)); });
    {
      MutexLock lock(&mu_);
      recognition_ = recognition;
    }
    if (context->IsCancelled()) recognition->Cancel();
  }

  void OnCancel() override {
    std::shared_ptr<OfflineRecognition> recognition;
    {
      MutexLock lock(&mu_);
      recognition = recognition_;
    }
    if (recognition) recognition->Cancel();
  }

  void OnDone() override { delete this; }

 private:
  void Answer(absl::StatusOr<OfflineResult> result) {
    const ModelConfig& config = voice_->model.config();
    if (!result.ok()) {
      metrics_->RecordAnswer(config, VoiceApi::kOffline, static_cast<int>(result.status().code()));
      Finish(ToGrpcStatus(result.status()));
      return;
    }
    metrics_->RecordProcessed(config, VoiceApi::kOffline, result->audio_seconds, absl::Now());
    metrics_->RecordAnswer(config, VoiceApi::kOffline, 0);
    riva::SpeechRecognitionResult* out = response_->add_results();
    FillAlternative(result->transcript, request_->config().enable_word_time_offsets(), *out->add_alternatives());
    out->set_channel_tag(1);
    out->set_audio_processed(static_cast<float>(result->audio_seconds));
    if (request_->has_id()) *response_->mutable_id() = request_->id();
    Finish(grpc::Status::OK);
  }

  const VoiceModel* const voice_;
  VoiceMetrics* const metrics_;
  const AdmittedCall admitted_;
  const riva::RecognizeRequest* const request_;
  riva::RecognizeResponse* const response_;
  Mutex mu_;
  std::shared_ptr<OfflineRecognition> recognition_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

RivaAsrService::RivaAsrService(ModelHub* hub, std::string bearer_token)
    : hub_(hub), bearer_token_(std::move(bearer_token)), models_(hub), metrics_(hub->metrics()) {}

grpc::ServerUnaryReactor* RivaAsrService::Recognize(grpc::CallbackServerContext* context,
                                                    const riva::RecognizeRequest* request,
                                                    riva::RecognizeResponse* response) {
  if (grpc::Status auth = CheckGrpcBearer(context, bearer_token_); !auth.ok()) return Reply(context, auth);
  // Admitted before its audio is decoded: this is the call's draining check. A drain that begins from here on
  // waits for it, and its windows are not refused for draining.
  AdmittedCall admitted = hub_->state().Admit();
  if (!admitted) return Reply(context, grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is draining"));
  absl::StatusOr<const VoiceModel*> voice = models_.Find(request->config().model());
  if (!voice.ok()) return Reply(context, ToGrpcStatus(voice.status()));
  const SpeechModel& model = (*voice)->model;
  absl::StatusOr<DecodedAudio> audio = DecodeAudio(request->audio(), DeclaredFrom(request->config()),
                                                   model.sample_rate(), model.speech().max_audio_seconds);
  if (!audio.ok()) {
    metrics_.RecordAnswer(model.config(), VoiceApi::kOffline, static_cast<int>(audio.status().code()));
    return Reply(context, ToGrpcStatus(audio.status()));
  }
  auto* reactor = new RecognizeReactor(*voice, &metrics_, std::move(admitted), request, response);
  reactor->Start(context, std::move(audio->samples));
  return reactor;
}

grpc::ServerBidiReactor<riva::StreamingRecognizeRequest, riva::StreamingRecognizeResponse>*
RivaAsrService::StreamingRecognize(grpc::CallbackServerContext* context) {
  if (grpc::Status auth = CheckGrpcBearer(context, bearer_token_); !auth.ok()) {
    return RefuseStream(auth);
  }
  return StartStreamingRecognize(context, hub_, &models_, &metrics_);
}

grpc::ServerUnaryReactor* RivaAsrService::GetRivaSpeechRecognitionConfig(
    grpc::CallbackServerContext* context, const riva::RivaSpeechRecognitionConfigRequest* request,
    riva::RivaSpeechRecognitionConfigResponse* response) {
  if (grpc::Status auth = CheckGrpcBearer(context, bearer_token_); !auth.ok()) return Reply(context, auth);
  absl::StatusOr<std::vector<const VoiceModel*>> all = models_.All();
  if (!all.ok()) return Reply(context, ToGrpcStatus(all.status()));
  if (!request->model_name().empty()) {
    if (absl::StatusOr<const VoiceModel*> one = models_.Find(request->model_name()); !one.ok()) {
      return Reply(context, ToGrpcStatus(one.status()));
    }
  }
  for (const VoiceModel* voice : *all) {
    const SpeechModel& model = voice->model;
    if (!request->model_name().empty() && model.name() != request->model_name()) continue;
    riva::RivaSpeechRecognitionConfigResponse::Config* config = response->add_model_config();
    config->set_model_name(model.name());
    auto& parameters = *config->mutable_parameters();
    parameters["type"] = "offline,streaming";
    parameters["default"] = voice == all->front() ? "true" : "false";
    parameters["sample_rate_hertz"] = absl::StrCat(model.sample_rate());
    parameters["max_audio_seconds"] = absl::StrCat(model.speech().max_audio_seconds);
    parameters["vocabulary_size"] = absl::StrCat(model.speech().vocabulary.size());
    parameters["frame_ms"] = absl::StrCat(1000.0 * model.speech().frame_samples / model.sample_rate());
    std::vector<double> bucket_seconds;
    for (int64_t length : model.config().buckets.lengths) {
      bucket_seconds.push_back(static_cast<double>(length) / model.sample_rate());
    }
    parameters["bucket_seconds"] = absl::StrJoin(bucket_seconds, ",");
    parameters["streaming_step_ms"] = absl::StrCat(model.speech().streaming.step_ms);
  }
  return Reply(context, grpc::Status::OK);
}

}  // namespace sluice::voice
