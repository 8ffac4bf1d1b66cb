#include "server/voice/openai_transcriptions.h"

#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backend/base/status_mapping.h"
#include "backend/base/sync.h"
#include "server/http/multipart_form.h"
#include "server/llm/frontend/openai_service.h"
#include "server/voice/audio_decode.h"
#include "server/voice/recognizer.h"
#include "server/voice/transcription_form.h"
#include "server/voice/transcription_format.h"

namespace sluice::voice {
namespace {

// A form upload names its container in its header (WAV, FLAC, OGG Opus, AIFF, AU); raw PCM has no header and the
// form no field for its rate, so it is refused (DecodeAudio names it) rather than guessed.
constexpr DeclaredAudio kContainerOnly{.encoding = AudioEncoding::kUnspecified, .sample_rate_hz = 0, .channels = 1};

absl::Status AboutFile(const absl::Status& status) {
  if (absl::StrContains(status.message(), "ENCODING_UNSPECIFIED")) {  // DecodeAudio's words are Riva's
    return WithRequestField(absl::InvalidArgumentError("'file' is not a WAV, FLAC, OGG Opus, AIFF or AU file (raw "
                                                       "PCM has no header giving its rate: send it as WAV)"),
                            "file");
  }
  return WithRequestField(absl::Status(status.code(), absl::StrCat("'file': ", status.message())), "file");
}

// One transcription call, shared by the decode work, the recognizer's completion and (weakly) the exchange's
// OnClientGone; it holds the call's admission, so a drain waits until the answer is sent. Answered exactly once:
// by Refuse (before the recognition started) or by Answer (the recognizer's completion).
class TranscriptionCall : public std::enable_shared_from_this<TranscriptionCall> {
 public:
  TranscriptionCall(std::shared_ptr<HttpExchange> exchange, AdmittedCall admitted, std::string body,
                    VoiceMetrics* metrics)
      : exchange_(std::move(exchange)), admitted_(std::move(admitted)), body_(std::move(body)), metrics_(metrics) {}

  const std::string& body() const { return body_; }

  void SetRequest(const VoiceModel* voice, TranscriptionRequest request) {
    voice_ = voice;
    request_ = std::move(request);
  }

  // The DecodeExecutor's work: decodes the audio (already probed) and starts the recognition, or answers why not.
  void DecodeAndStart() {
    if (exchange_->client_gone()) return Refuse(absl::CancelledError("the client went away before the decode"));
    const Recognizer& recognizer = *voice_->recognizer;
    absl::StatusOr<DecodedAudio> audio = absl::InternalError("not decoded");
    try {
      audio = DecodeAudio(request_.audio, kContainerOnly, recognizer.sample_rate(),
                          voice_->config().speech->max_audio_seconds);
    } catch (const std::bad_alloc&) {
      audio = absl::ResourceExhaustedError("out of memory while decoding the audio; retry later");
    }
    // The upload is no longer needed: free it before the recognition runs.
    request_.audio = {};
    std::string().swap(body_);
    if (!audio.ok()) return Refuse(AboutFile(audio.status()));
    const double seconds = static_cast<double>(audio->samples.size()) / recognizer.sample_rate();
    metrics_->RecordAudio(voice_->config(), VoiceApi::kOpenAi, seconds);
    std::shared_ptr<RecognitionHandle> handle = recognizer.Start(
        std::move(audio->samples), request_.options,
        [self = shared_from_this()](absl::StatusOr<Recognition> result) { self->Answer(std::move(result)); });
    bool cancel = false;
    {
      MutexLock lock(&mu_);
      if (!answered_) {
        recognition_ = handle;  // kept only while unanswered: the completion may have run already
        cancel = client_gone_;
      }
    }
    if (cancel) handle->Cancel();  // outside mu_: Cancel may answer on this thread
  }

  void DecodeQueued(DecodeTicket ticket) {
    MutexLock lock(&mu_);
    queued_decode_ = ticket;
  }

  // The exchange's OnClientGone (an io thread): a decode no thread has started is taken back (its slot is free at
  // once); a running recognition is cancelled.
  void ClientGone(DecodeExecutor* decodes) {
    std::optional<DecodeTicket> queued;
    std::shared_ptr<RecognitionHandle> recognition;
    {
      MutexLock lock(&mu_);
      client_gone_ = true;
      queued = std::exchange(queued_decode_, std::nullopt);
      recognition = recognition_;
    }
    if (queued && decodes->Withdraw(*queued)) {
      Refuse(absl::CancelledError("the client went away while the decode waited"));
    } else if (recognition) {
      recognition->Cancel();
    }
  }

  // Answers `status` before any recognition started (voice_ may still be null: no model was found).
  void Refuse(const absl::Status& status) {
    {
      MutexLock lock(&mu_);
      if (answered_) return;
      answered_ = true;
    }
    if (voice_ != nullptr) metrics_->RecordAnswer(voice_->config(), VoiceApi::kOpenAi, static_cast<int>(status.code()));
    SendOpenAiError(*exchange_, status, absl::IsNotFound(status) ? "model_not_found" : "");
  }

 private:
  void Answer(absl::StatusOr<Recognition> result) {
    std::shared_ptr<RecognitionHandle> recognition;  // released after the answer, outside mu_
    {
      MutexLock lock(&mu_);
      if (answered_) return;
      answered_ = true;
      recognition = std::move(recognition_);
    }
    const ModelConfig& config = voice_->config();
    if (result.ok()) {
      if (absl::Status answerable = CheckAnswerable(*result, request_, config.name); !answerable.ok()) {
        result = answerable;
      }
    }
    if (!result.ok()) {
      metrics_->RecordAnswer(config, VoiceApi::kOpenAi, static_cast<int>(result.status().code()));
      SendOpenAiError(*exchange_, result.status());
      return;
    }
    TranscriptionBody body = FormatTranscription(*result, request_);
    metrics_->RecordProcessed(config, VoiceApi::kOpenAi, result->audio_seconds, absl::Now());
    metrics_->RecordAnswer(config, VoiceApi::kOpenAi, 0);
    HttpResponse response;
    response.content_type = std::move(body.content_type);
    response.body = std::move(body.body);
    exchange_->Respond(std::move(response));
  }

  const std::shared_ptr<HttpExchange> exchange_;
  const AdmittedCall admitted_;
  std::string body_;  // the upload, which request_.audio views, until decoded
  VoiceMetrics* const metrics_;
  // Set once before the decode is submitted (SetRequest), then read-only (request_.audio cleared by the decode).
  const VoiceModel* voice_ = nullptr;
  TranscriptionRequest request_;

  Mutex mu_;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
  bool client_gone_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<DecodeTicket> queued_decode_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<RecognitionHandle> recognition_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

void OpenAiTranscriptions::Serve(HttpRequest& request, const std::shared_ptr<HttpExchange>& exchange) const {
  // Admitted before anything else: the draining check; a drain that begins from here on waits for the answer.
  AdmittedCall admitted = hub_->state().Admit();
  if (!admitted) return SendOpenAiError(*exchange, absl::UnavailableError("the server is draining"));
  auto call = std::make_shared<TranscriptionCall>(exchange, std::move(admitted), std::move(request.body), metrics_);

  const std::optional<std::string_view> content_type = request.Header("Content-Type");
  if (!content_type) {
    return call->Refuse(absl::InvalidArgumentError("no Content-Type: send the form as multipart/form-data"));
  }
  absl::StatusOr<std::string> boundary = MultipartBoundary(*content_type);
  if (!boundary.ok()) return call->Refuse(boundary.status());
  absl::StatusOr<MultipartForm> form = ParseMultipartForm(call->body(), *boundary);
  if (!form.ok()) return call->Refuse(form.status());
  absl::StatusOr<TranscriptionRequest> decoded = DecodeTranscriptionForm(*form);
  if (!decoded.ok()) return call->Refuse(decoded.status());
  absl::StatusOr<const VoiceModel*> voice = models_->Find(decoded->model);
  if (!voice.ok()) return call->Refuse(WithRequestField(voice.status(), "model"));
  const std::string_view audio = decoded->audio;
  call->SetRequest(*voice, *std::move(decoded));

  // Refused from the header, before anything is decoded or queued.
  const double max_seconds = (*voice)->config().speech->max_audio_seconds;
  absl::StatusOr<AudioExtent> extent = ProbeAudio(audio, kContainerOnly, max_seconds);
  if (!extent.ok()) return call->Refuse(AboutFile(extent.status()));
  const int64_t peak_bytes = DecodePeakBytes(*extent, (*voice)->recognizer->sample_rate(), max_seconds);

  DecodeExecutor* const decodes = decodes_;
  // Weak: the exchange keeps its callback, and the call keeps the exchange.
  exchange->OnClientGone([weak = std::weak_ptr<TranscriptionCall>(call), decodes] {
    if (std::shared_ptr<TranscriptionCall> call = weak.lock()) call->ClientGone(decodes);
  });
  absl::StatusOr<DecodeTicket> queued = decodes->Submit(peak_bytes, [call] { call->DecodeAndStart(); });
  if (!queued.ok()) return call->Refuse(queued.status());
  call->DecodeQueued(*queued);
}

}  // namespace sluice::voice
