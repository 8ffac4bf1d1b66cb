#include "server/voice/riva_service.h"

#include <chrono>
#include <new>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "backend/base/sync.h"
#include "backend/base/tsan_handoff.h"
#include "server/kserve/grpc_service.h"
#include "server/voice/recognizer.h"
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

// One Recognize call: lives from the handler until gRPC's OnDone and the end of DecodeAndStart or RefuseUnstarted
// (whichever is later deletes it: the decoding thread may still be in Start when a scheduler thread's answer has
// finished the call); finished exactly once — by Refuse, or by the recognition's completion (a scheduler thread, or
// the decoding thread when the first window is refused). It holds the call's admission until it is deleted, so a
// drain waits for the answer (decoding included) to be sent. A call cancelled (or past its deadline: gRPC cancels
// it then) while its decode waits on the DecodeExecutor takes the decode back in OnCancel and is answered there, so
// that it stops holding a decode slot at once.
class RecognizeReactor final : public grpc::ServerUnaryReactor {
 public:
  RecognizeReactor(grpc::CallbackServerContext* context, const VoiceModel* voice, VoiceMetrics* metrics,
                   DecodeExecutor* decodes, AdmittedCall admitted, const riva::RecognizeRequest* request,
                   riva::RecognizeResponse* response)
      : context_(context), voice_(voice), metrics_(metrics), decodes_(decodes), admitted_(std::move(admitted)),
        request_(request), response_(response) {}

  // Decodes the request's audio (already probed: its size is within the limits) and starts its recognition, or
  // answers why not. On a DecodeExecutor thread, or the handler's for small audio. Called once, or else
  // RefuseUnstarted.
  void DecodeAndStart() {
    DecodeAndStartOrRefuse();
    Release();
  }

  // The handler's refusal (decode admission), or OnCancel's after taking the decode back, instead of
  // DecodeAndStart.
  void RefuseUnstarted(const absl::Status& status) {
    Refuse(status);
    Release();
  }

  // The handler's, once the decode is queued on the DecodeExecutor as `ticket` (it may have started already).
  void DecodeQueued(DecodeTicket ticket) {
    MutexLock lock(&mu_);
    queued_decode_ = ticket;
  }

  void OnCancel() override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs OnCancel after the handler returned the reactor (Recognize's release)
    std::shared_ptr<RecognitionHandle> recognition;
    std::optional<DecodeTicket> queued;
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
      recognition = recognition_;
      queued = queued_decode_;
    }
    // A decode no thread has started will now never run: its slot is free for other calls at once, and the call
    // is answered here (gRPC runs OnDone only after OnCancel returns, so Release does not delete the reactor).
    if (queued && decodes_->Withdraw(*queued)) {
      RefuseUnstarted(WhyUnstarted());
    } else if (recognition) {
      recognition->Cancel();
    }
    SLUICE_TSAN_RELEASE(this);  // gRPC runs OnDone (which may delete the reactor) after OnCancel has returned
  }

  void OnDone() override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs it after Finish (preceded by a release), on another thread
    VoiceMetrics* const metrics = metrics_;  // before the lock: once it is released, Release may delete the reactor
    bool delete_now;
    {
      MutexLock lock(&mu_);
      done_ = true;
      delete_now = !starting_;
    }
    if (delete_now) delete this;  // and with it the call's admission
    SLUICE_TSAN_RELEASE(metrics);  // this call's last touch of the service's state (see ~RivaAsrService)
  }

 private:
  void Release() {
    bool delete_now;
    {
      MutexLock lock(&mu_);
      starting_ = false;
      delete_now = done_;
    }
    if (delete_now) delete this;
  }

  // Why a cancelled call (its context valid: not yet finished) was not decoded.
  absl::Status WhyUnstarted() const {
    if (absl::Now() >= DeadlineOf(context_)) {
      return absl::DeadlineExceededError("the recognition's deadline passed before its audio was decoded");
    }
    return absl::CancelledError("the client cancelled the recognition");
  }

  void DecodeAndStartOrRefuse() {
    if (context_->IsCancelled()) return Refuse(WhyUnstarted());  // skipped at once: nobody waits for the answer
    const Recognizer& recognizer = *voice_->recognizer;
    absl::StatusOr<DecodedAudio> audio = absl::InternalError("not decoded");
    try {
      audio = DecodeAudio(request_->audio(), DeclaredFrom(request_->config()), recognizer.sample_rate(),
                          voice_->config().speech->max_audio_seconds);
    } catch (const std::bad_alloc&) {
      audio = absl::ResourceExhaustedError("out of memory while decoding the audio; retry later");
    }
    if (!audio.ok()) return Refuse(audio.status());
    Start(std::move(audio->samples));
  }

  // Answers `status` before any recognition started.
  void Refuse(const absl::Status& status) {
    metrics_->RecordAnswer(voice_->config(), VoiceApi::kOffline, static_cast<int>(status.code()));
    SLUICE_TSAN_RELEASE(this);  // for OnDone, on another thread
    Finish(ToGrpcStatus(status));
  }

  void Start(std::vector<float> audio) {
    grpc::CallbackServerContext* const context = context_;
    const double seconds = static_cast<double>(audio.size()) / voice_->recognizer->sample_rate();
    metrics_->RecordAudio(voice_->config(), VoiceApi::kOffline, seconds);
    RecognizeOptions options;
    options.language = request_->config().language_code();
    options.deadline = DeadlineOf(context);
    std::shared_ptr<RecognitionHandle> recognition = voice_->recognizer->Start(
        std::move(audio), options, [this](absl::StatusOr<Recognition> result) { Answer(std::move(result)); });
    bool cancelled;
    {
      MutexLock lock(&mu_);
      recognition_ = recognition;
      cancelled = cancelled_;
    }
    // Not context->IsCancelled(): the recognition may have answered already (a window refused on the spot), after
    // which gRPC may run OnDone and free the context while this (decoding) thread is still here.
    if (cancelled) recognition->Cancel();
  }

  void Answer(absl::StatusOr<Recognition> result) {
    const ModelConfig& config = voice_->config();
    if (!result.ok()) {
      metrics_->RecordAnswer(config, VoiceApi::kOffline, static_cast<int>(result.status().code()));
      SLUICE_TSAN_RELEASE(this);  // for OnDone, on another thread
      Finish(ToGrpcStatus(result.status()));
      return;
    }
    metrics_->RecordProcessed(config, VoiceApi::kOffline, result->audio_seconds, absl::Now());
    metrics_->RecordAnswer(config, VoiceApi::kOffline, 0);
    riva::SpeechRecognitionResult* out = response_->add_results();
    riva::SpeechRecognitionAlternative& alternative = *out->add_alternatives();
    FillAlternative(result->transcript, request_->config().enable_word_time_offsets() && result->word_times,
                    alternative);
    if (!result->language.empty()) alternative.add_language_code(result->language);
    out->set_channel_tag(1);
    out->set_audio_processed(static_cast<float>(result->audio_seconds));
    if (request_->has_id()) *response_->mutable_id() = request_->id();
    SLUICE_TSAN_RELEASE(this);  // for OnDone, on another thread
    Finish(grpc::Status::OK);
  }

  grpc::CallbackServerContext* const context_;
  const VoiceModel* const voice_;
  VoiceMetrics* const metrics_;
  DecodeExecutor* const decodes_;
  const AdmittedCall admitted_;
  const riva::RecognizeRequest* const request_;
  riva::RecognizeResponse* const response_;
  Mutex mu_;
  std::shared_ptr<RecognitionHandle> recognition_ ABSL_GUARDED_BY(mu_);
  bool starting_ ABSL_GUARDED_BY(mu_) = true;  // until DecodeAndStart (or RefuseUnstarted) has returned
  bool done_ ABSL_GUARDED_BY(mu_) = false;     // OnDone has run
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;  // OnCancel has run (it cancels recognition_ if already set)
  std::optional<DecodeTicket> queued_decode_ ABSL_GUARDED_BY(mu_);  // set when the decode went to the executor
};

}  // namespace

RivaAsrService::RivaAsrService(ModelHub* hub, std::string bearer_token, const VoiceConfig& config)
    : hub_(hub),
      bearer_token_(std::move(bearer_token)),
      config_(config),
      models_(hub, config.default_model),
      metrics_(hub->metrics()),
      decodes_(DecodeLimits{.concurrency = static_cast<int>(config.decode_threads),
                            .max_waiting = static_cast<int>(config.max_waiting_decodes),
                            .max_bytes = config.max_decode_bytes}) {}

// The owner destroys the service after the gRPC server's Shutdown, which returns only once every call's OnDone has
// returned (gRPC's own wait, invisible to TSan): each OnDone ends with a release of metrics_. A reactor deleted
// later, by its last window or decode, is ordered by the scheduler's threads being joined (ModelHub::StopAll) or
// by the DecodeExecutor's WaitIdle (decodes_ is destroyed first).
RivaAsrService::~RivaAsrService() { SLUICE_TSAN_ACQUIRE(&metrics_); }

absl::Status RivaAsrService::CheckDefaultModel() {
  if (config_.default_model.empty()) return absl::OkStatus();
  absl::StatusOr<const VoiceModel*> model = models_.Default();
  if (model.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(config_.default_model_where, "must name a served speech model: ",
                                                 model.status().message()));
}

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
  const ModelConfig& config = (*voice)->config();
  // Refused from the byte count or header, before anything is decoded or queued.
  const double max_seconds = config.speech->max_audio_seconds;
  absl::StatusOr<AudioExtent> extent = ProbeAudio(request->audio(), DeclaredFrom(request->config()), max_seconds);
  if (!extent.ok()) {
    metrics_.RecordAnswer(config, VoiceApi::kOffline, static_cast<int>(extent.status().code()));
    return Reply(context, ToGrpcStatus(extent.status()));
  }
  auto* reactor =
      new RecognizeReactor(context, *voice, &metrics_, &decodes_, std::move(admitted), request, response);
  const int64_t peak_bytes = DecodePeakBytes(*extent, (*voice)->recognizer->sample_rate(), max_seconds);
  if (peak_bytes <= kInlineDecodeBytes) {
    reactor->DecodeAndStart();
  } else if (absl::StatusOr<DecodeTicket> queued =
                 decodes_.Submit(peak_bytes, [reactor] { reactor->DecodeAndStart(); });
             !queued.ok()) {
    reactor->RefuseUnstarted(queued.status());
  } else {
    // The reactor outlives this: OnDone, which may delete it, runs only after the handler has returned it.
    reactor->DecodeQueued(*queued);
  }
  SLUICE_TSAN_RELEASE(reactor);  // gRPC binds the reactor, then may run OnCancel, after this handler returns
  return reactor;
}

grpc::ServerBidiReactor<riva::StreamingRecognizeRequest, riva::StreamingRecognizeResponse>*
RivaAsrService::StreamingRecognize(grpc::CallbackServerContext* context) {
  if (grpc::Status auth = CheckGrpcBearer(context, bearer_token_); !auth.ok()) {
    return RefuseStream(auth);
  }
  return StartStreamingRecognize(context, StreamingDeps{.hub = hub_,
                                                        .models = &models_,
                                                        .metrics = &metrics_,
                                                        .decodes = &decodes_,
                                                        .engines = &stream_engines_,
                                                        .tickers = &window_tickers_,
                                                        .idle_timeout = absl::Milliseconds(
                                                            config_.stream_idle_timeout_ms)});
}

grpc::ServerUnaryReactor* RivaAsrService::GetRivaSpeechRecognitionConfig(
    grpc::CallbackServerContext* context, const riva::RivaSpeechRecognitionConfigRequest* request,
    riva::RivaSpeechRecognitionConfigResponse* response) {
  if (grpc::Status auth = CheckGrpcBearer(context, bearer_token_); !auth.ok()) return Reply(context, auth);
  absl::StatusOr<std::vector<const VoiceModel*>> all = models_.All();
  if (!all.ok()) return Reply(context, ToGrpcStatus(all.status()));
  const absl::StatusOr<const VoiceModel*> default_model = models_.Default();
  if (!request->model_name().empty()) {
    if (absl::StatusOr<const VoiceModel*> one = models_.Find(request->model_name()); !one.ok()) {
      return Reply(context, ToGrpcStatus(one.status()));
    }
  }
  for (const VoiceModel* voice : *all) {
    if (!request->model_name().empty() && voice->name() != request->model_name()) continue;
    riva::RivaSpeechRecognitionConfigResponse::Config* config = response->add_model_config();
    config->set_model_name(voice->name());
    auto& parameters = *config->mutable_parameters();
    parameters["type"] = voice->model ? "offline,streaming" : "offline";
    parameters["default"] = default_model.ok() && voice == *default_model ? "true" : "false";
    const int sample_rate = voice->recognizer->sample_rate();
    const SpeechOptions& speech = *voice->config().speech;
    parameters["sample_rate_hertz"] = absl::StrCat(sample_rate);
    parameters["max_audio_seconds"] = absl::StrCat(speech.max_audio_seconds);
    if (speech.recognizer == RecognizerKind::kCtc) {
      parameters["vocabulary_size"] = absl::StrCat(speech.vocabulary.size());
      parameters["frame_ms"] = absl::StrCat(1000.0 * speech.frame_samples / sample_rate);
    } else {
      parameters["recognizer"] = "whisper";
    }
    std::vector<double> bucket_seconds;
    for (int64_t length : voice->config().buckets.lengths) {
      bucket_seconds.push_back(static_cast<double>(length) / sample_rate);
    }
    parameters["bucket_seconds"] = absl::StrJoin(bucket_seconds, ",");
    if (voice->model) parameters["streaming_step_ms"] = absl::StrCat(speech.streaming.step_ms);
  }
  return Reply(context, grpc::Status::OK);
}

}  // namespace sluice::voice
