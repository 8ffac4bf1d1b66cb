#include "server/voice/riva_streaming.h"

#include <grpcpp/alarm.h>

#include <chrono>
#include <deque>
#include <new>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "backend/base/sync.h"
#include "backend/base/tsan_handoff.h"
#include "server/kserve/grpc_service.h"
#include "server/voice/audio_decode.h"
#include "server/voice/riva_results.h"
#include "server/voice/chunked_session.h"
#include "server/voice/streaming_session.h"
#include "server/voice/whisper_stream_session.h"

namespace sluice::voice {
namespace {

namespace riva = nvidia::riva::asr;

constexpr int kMaxBacklogWindows = 2;

class StreamingReactor final
    : public grpc::ServerBidiReactor<riva::StreamingRecognizeRequest, riva::StreamingRecognizeResponse> {
 public:
  StreamingReactor(grpc::CallbackServerContext* context, const StreamingDeps& deps)
      : hub_(deps.hub), models_(deps.models), metrics_(deps.metrics), decodes_(deps.decodes),
        engines_(deps.engines), tickers_(deps.tickers), idle_timeout_(deps.idle_timeout) {
    if (context->deadline() != std::chrono::system_clock::time_point::max()) {
      deadline_ = absl::FromChrono(context->deadline());
    }
    {
      MutexLock lock(&mu_);
      StartReadLocked();
    }
    ArmIdleAlarm();
    SLUICE_TSAN_RELEASE(this);  // gRPC runs OnCancel (the one reaction not under mu_ at once) after the handler returns
  }

  void OnReadDone(bool ok) override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs it after the StartRead (preceded by a release) that asked for it
    std::optional<ScheduledWindow> window;
    std::shared_ptr<RecognitionHandle> superseded;
    {
      MutexLock lock(&mu_);
      reading_ = false;
      if (finishing_) return;
      if (!ok) {
        HalfClosed();
        superseded = SupersededRunLocked();
      } else if (!voice_) {
        Configure();
      } else {
        AddAudio();
      }
      if (!finishing_) window = NextWindowLocked();
      WriteOrFinishLocked();
    }
    if (superseded) superseded->Cancel();  // its end comes to OnRunDone, as Cancelled
    RunWindow(std::move(window));
    ArmIdleAlarm();
  }

  void OnWriteDone(bool ok) override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs it after the StartWrite (preceded by a release) that asked for it
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {  // the client is gone: nothing more can be sent
      FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client closed the stream"));
      writes_.clear();
    } else {
      writes_.pop_front();
    }
    WriteOrFinishLocked();
  }

  void OnCancel() override {
    SLUICE_TSAN_ACQUIRE(this);  // see the constructor
    InferHandle handle;
    std::shared_ptr<RecognitionHandle> recognition;
    bool withdrawn = false;
    {
      MutexLock lock(&mu_);
      cancelled_ = true;
      handle = window_handle_;
      recognition = recognition_handle_;
      // A chunk decode no thread has started will now never run: its slot is free for other calls at once, and
      // the stream ends here (no read is outstanding while decoding_, so nothing else would end it).
      if (decoding_ && decodes_->Withdraw(decode_ticket_)) {
        withdrawn = true;
        decoding_ = false;
        FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream"));
        WriteOrFinishLocked();
      }
    }
    handle.Cancel();
    if (recognition) recognition->Cancel();
    // The decode's hold. gRPC runs OnDone only after OnCancel returns, so this is never the deleting release.
    if (withdrawn) ReleaseHold();
  }

  void OnDone() override {
    SLUICE_TSAN_ACQUIRE(this);  // gRPC runs it after Finish (preceded by a release) and after every reaction
    VoiceMetrics* const metrics = metrics_;
    EndStream();
    SLUICE_TSAN_RELEASE(metrics);  // this call's last touch of the service's state (see ~RivaAsrService)
  }

 private:
  // OnDone's work: may delete the reactor.
  void EndStream() {
    // First: once Unregister returns no tick runs on this reactor (ticker_ is written once by Configure, under mu_,
    // before any tick; OnDone runs after every other reaction).
    if (ticker_ != nullptr) ticker_->Unregister(tick_id_);
    // The stream's slot, unless Finish gave it back already: a chunk of it still queued completes now (a hold of
    // its own), and the slot is reused once no step runs it.
    bool release_slot;
    {
      MutexLock lock(&mu_);
      release_slot = slot_held_;
      slot_held_ = false;
    }
    if (release_slot) engine_->ReleaseSlot(slot_);
    bool delete_now;
    std::shared_ptr<grpc::Alarm> alarm;
    AdmittedCall admitted;  // the stream has ended: a drain no longer waits for it (released after the lock)
    {
      MutexLock lock(&mu_);
      done_ = true;
      if (voice_) {
        metrics_->StreamClosed(voice_->config());
        metrics_->RecordAnswer(voice_->config(), VoiceApi::kStreaming, finish_code_);
      }
      admitted = std::move(admitted_);
      delete_now = holds_ == 0;
      if (alarm_pending_) alarm = idle_alarm_;
    }
    if (delete_now) {
      delete this;
      return;
    }
    // Its callback (soon, ok = false) deletes the reactor if nothing else is pending; `alarm` keeps the Alarm
    // alive until Cancel returns even if that happens first.
    if (alarm) alarm->Cancel();
  }

  // The first message: the streaming config names the model and the audio format.
  void Configure() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!request_.has_streaming_config()) {
      return FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "the first StreamingRecognizeRequest must carry streaming_config"));
    }
    admitted_ = hub_->state().Admit();  // held until OnDone: a drain waits for this stream
    if (!admitted_) return FailLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is draining"));
    const riva::StreamingRecognitionConfig& config = request_.streaming_config();
    absl::StatusOr<const VoiceModel*> voice = models_->Find(config.config().model());
    if (!voice.ok()) return FailLocked(ToGrpcStatus(voice.status()));
    const bool recognized = !(*voice)->model && (*voice)->config().is_encoder_decoder();
    if (!(*voice)->model && !recognized) {
      return FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     absl::StrCat("model '", (*voice)->name(), "' does not stream: use Recognize")));
    }
    const Recognizer& recognizer = *(*voice)->recognizer;
    absl::StatusOr<std::unique_ptr<StreamingAudioDecoder>> decoder = StreamingAudioDecoder::Create(
        DeclaredFrom(config.config()), recognizer.sample_rate(), recognizer.config().speech->max_audio_seconds);
    if (!decoder.ok()) return FailLocked(ToGrpcStatus(decoder.status()));
    if (recognized) return ConfigureRecognized(**voice, config, *std::move(decoder));
    const SpeechModel& model = *(*voice)->model;
    StreamEngine* engine = engines_ != nullptr ? engines_->Find(model.name()) : nullptr;
    const bool ticked = engine == nullptr && tickers_ != nullptr && model.speech().streaming.shared_tick;
    absl::StatusOr<std::unique_ptr<StreamSession>> session =
        engine != nullptr ? ChunkedFor(*engine, model, config, (*voice)->decoder.get())
                          : WindowedFor(model, config, (*voice)->decoder.get(), ticked);
    if (!session.ok()) return FailLocked(ToGrpcStatus(session.status()));
    if (engine != nullptr) {
      absl::StatusOr<int> slot = engine->AcquireSlot();
      if (!slot.ok()) return FailLocked(ToGrpcStatus(slot.status()));
      engine_ = engine;
      slot_ = *slot;
      slot_held_ = true;
    }
    if (ticked) {
      ticker_ = tickers_->ForModel(model.name(), absl::Milliseconds(model.speech().streaming.step_ms));
      tick_id_ = ticker_->Register([this] { OnTick(); });
    }
    voice_ = *voice;
    Configured(config, *std::move(decoder), *std::move(session));
  }

  // The rest of Configure, whatever runs the stream.
  void Configured(const riva::StreamingRecognitionConfig& config, std::unique_ptr<StreamingAudioDecoder> decoder,
                  std::unique_ptr<StreamSession> session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    window_samples_ = voice_->config().max_length();
    word_times_ = config.config().enable_word_time_offsets();
    if (request_.has_id()) id_ = request_.id();
    audio_decoder_ = std::move(decoder);
    session_ = std::move(session);
    metrics_->StreamOpened(voice_->config());
    StartReadLocked();
  }

  // An encoder-decoder model (Whisper): its runs are recognitions of the segment so far through its Recognizer
  // (whisper_stream_session.h), interims once per speech.streaming.step_ms of new audio. Energy endpointing only when
  // the client asks for it: EndpointingConfig.stop_history (ms of silence after speech; start_history: ms of speech
  // first); the thresholds are probabilities of a model's output, which Whisper has none to compare with.
  void ConfigureRecognized(const VoiceModel& voice, const riva::StreamingRecognitionConfig& config,
                           std::unique_ptr<StreamingAudioDecoder> decoder) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Recognizer& recognizer = *voice.recognizer;
    const int rate = recognizer.sample_rate();
    absl::StatusOr<WhisperStreamSession> session = WhisperStreamSession::Create(WhisperStreamOptions{
        .sample_rate = rate,
        .window_samples = recognizer.config().max_length(),
        .interim_step_samples = int64_t{rate} * recognizer.config().speech->streaming.step_ms / 1000,
        .interim_results = config.interim_results(),
        .endpoint_silence_samples = EndpointMs(config, &riva::EndpointingConfig::stop_history) * rate / 1000,
        .endpoint_min_speech_samples = EndpointMs(config, &riva::EndpointingConfig::start_history) * rate / 1000,
        .vad_frame_samples = rate / 50});
    if (!session.ok()) return FailLocked(ToGrpcStatus(session.status()));
    voice_ = &voice;
    recognizer_ = &recognizer;
    recognize_options_.language = config.config().language_code();
    recognize_options_.deadline = deadline_;
    Configured(config, std::move(decoder), std::make_unique<WhisperStreamSession>(*std::move(session)));
  }

  static absl::StatusOr<std::unique_ptr<StreamSession>> WindowedFor(const SpeechModel& model,
                                                                   const riva::StreamingRecognitionConfig& config,
                                                                   const CtcDecoder* decoder, bool ticked) {
    absl::StatusOr<StreamingSession> session = StreamingSession::Create(
        StreamingSessionOptions{.sample_rate = model.sample_rate(),
                                .frame_samples = model.speech().frame_samples,
                                .max_window_samples = model.max_window_samples(),
                                .blank = model.speech().blank,
                                .streaming = model.speech().streaming,
                                .interim_results = config.interim_results(),
                                .ticked = ticked},
        decoder);
    if (!session.ok()) return session.status();
    return std::make_unique<StreamingSession>(*std::move(session));
  }

  // A positive EndpointingConfig history field (ms), else 0.
  static int64_t EndpointMs(const riva::StreamingRecognitionConfig& config,
                            int32_t (riva::EndpointingConfig::*field)() const) {
    if (!config.config().has_endpointing_config()) return 0;
    const int32_t ms = (config.config().endpointing_config().*field)();
    return ms > 0 ? ms : 0;
  }

  // Riva's EndpointingConfig, where it maps (chunked_session.h); unset fields keep the model's defaults.
  static absl::StatusOr<std::unique_ptr<StreamSession>> ChunkedFor(const StreamEngine& engine,
                                                                  const SpeechModel& model,
                                                                  const riva::StreamingRecognitionConfig& config,
                                                                  const CtcDecoder* decoder) {
    EndpointOptions endpoint{.stop_history_ms = model.speech().streaming.endpoint_silence_ms};
    if (config.config().has_endpointing_config()) {
      const riva::EndpointingConfig& e = config.config().endpointing_config();
      if (e.has_start_history()) endpoint.start_history_ms = e.start_history();
      if (e.has_start_threshold()) endpoint.start_threshold = e.start_threshold();
      if (e.has_stop_history()) endpoint.stop_history_ms = e.stop_history();
      if (e.has_stop_threshold()) endpoint.stop_threshold = e.stop_threshold();
    }
    absl::StatusOr<ChunkedSession> session = ChunkedSession::Create(
        ChunkedSessionOptions{.sample_rate = model.sample_rate(),
                              .frame_samples = model.speech().frame_samples,
                              .chunk_samples = engine.chunk_samples(),
                              .blank = model.speech().blank,
                              .endpoint = endpoint,
                              .interim_results = config.interim_results()},
        decoder);
    if (!session.ok()) return session.status();
    return std::make_unique<ChunkedSession>(*std::move(session));
  }

  void AddAudio() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (request_.has_streaming_config()) {
      return FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "streaming_config may only be sent in the first message"));
    }
    // The chunk leaves request_, which the next read reuses: its memory goes with it once decoded (or refused).
    std::string chunk = std::move(*request_.mutable_audio_content());
    request_.Clear();
    absl::StatusOr<int64_t> peak_bytes = audio_decoder_->CheckRoomFor(chunk);  // refused from its size
    if (!peak_bytes.ok()) return FailLocked(ToGrpcStatus(peak_bytes.status()));
    if (*peak_bytes > kStreamInlineDecodeBytes) return OffloadDecode(std::move(chunk), *peak_bytes);
    std::vector<float> samples;
    if (absl::Status appended = audio_decoder_->Append(chunk, &samples); !appended.ok()) {
      return FailLocked(ToGrpcStatus(appended));
    }
    AfterAudio(samples);
  }

  // Accepts decoded samples and reads on, or pauses reading (flow control).
  void AfterAudio(const std::vector<float>& samples) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!Accept(samples)) return;
    if (!Backlogged()) {
      StartReadLocked();
    } else {
      read_paused_ = true;  // resumed by a finished window (flow control)
    }
  }

  // A large chunk is decoded on the DecodeExecutor; no read is outstanding until it is done, so nothing else
  // touches the decoder meanwhile.
  void OffloadDecode(std::string chunk, int64_t peak_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    auto bytes = std::make_shared<std::string>(std::move(chunk));
    StreamingAudioDecoder* decoder = audio_decoder_.get();
    decoding_ = true;
    ++holds_;  // the decode's, released at the end of OnChunkDecoded
    absl::StatusOr<DecodeTicket> queued =
        decodes_->Submit(peak_bytes, [this, decoder, bytes] { OnChunkDecoded(DecodeChunk(decoder, *bytes)); });
    if (!queued.ok()) {
      decoding_ = false;
      --holds_;  // in a reaction (OnReadDone): OnDone cannot have run, so this is never the deleting release
      FailLocked(ToGrpcStatus(queued.status()));
      return;
    }
    decode_ticket_ = *queued;  // under mu_: the decode's OnChunkDecoded (or OnCancel's Withdraw) reads it after
  }

  // On a DecodeExecutor thread, without the lock (see OffloadDecode).
  static absl::StatusOr<std::vector<float>> DecodeChunk(StreamingAudioDecoder* decoder, const std::string& bytes) {
    std::vector<float> samples;
    try {
      if (absl::Status appended = decoder->Append(bytes, &samples); !appended.ok()) return appended;
    } catch (const std::bad_alloc&) {
      return absl::ResourceExhaustedError("out of memory while decoding a stream chunk; retry later");
    }
    return samples;
  }

  // On a DecodeExecutor thread, holding the decode's hold until its last step.
  void OnChunkDecoded(absl::StatusOr<std::vector<float>> samples) ABSL_LOCKS_EXCLUDED(mu_) {
    std::optional<ScheduledWindow> window;
    {
      MutexLock lock(&mu_);
      decoding_ = false;
      if (!done_ && !finishing_) {
        if (!samples.ok()) {
          FailLocked(ToGrpcStatus(samples.status()));
        } else {
          AfterAudio(*samples);
        }
        if (!finishing_) window = NextWindowLocked();
        WriteOrFinishLocked();
      }
    }
    RunWindow(std::move(window));
    ArmIdleAlarm();
    ReleaseHold();
  }

  void StartReadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    reading_ = true;
    read_started_ = absl::Now();
    SLUICE_TSAN_RELEASE(this);  // for OnReadDone, on another thread
    StartRead(&request_);
  }

  // Keeps one idle alarm pending while the stream lives: it fires at the outstanding read's start + idle_timeout_
  // (or a timeout from now while none is outstanding) and then checks. Not under mu_ (Set may run its callback).
  void ArmIdleAlarm() ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<grpc::Alarm> alarm;
    absl::Time at;
    {
      MutexLock lock(&mu_);
      if (alarm_pending_ || finishing_ || done_ || idle_timeout_ == absl::InfiniteDuration()) return;
      alarm_pending_ = true;
      ++holds_;  // the alarm's, released at the end of OnIdleAlarm
      idle_alarm_ = alarm = std::make_shared<grpc::Alarm>();
      at = (reading_ ? read_started_ : absl::Now()) + idle_timeout_;
    }
    // Should OnDone run before Set (its Cancel then finds nothing armed), the alarm fires at `at` and deletes the
    // reactor then: late by at most one timeout, never leaked.
    SLUICE_TSAN_RELEASE(this);  // grpc::Alarm runs the callback after Set, on a gRPC thread
    alarm->Set(absl::ToChronoTime(at), [this](bool fired) { OnIdleAlarm(fired); });
  }

  void OnIdleAlarm(bool fired) ABSL_LOCKS_EXCLUDED(mu_) {
    SLUICE_TSAN_ACQUIRE(this);  // see ArmIdleAlarm
    bool rearm = false;
    {
      MutexLock lock(&mu_);
      alarm_pending_ = false;
      if (!done_ && fired && !finishing_) {
        if (reading_ && absl::Now() - read_started_ >= idle_timeout_) {
          FailLocked(grpc::Status(
              grpc::StatusCode::DEADLINE_EXCEEDED,
              absl::StrCat("no message on this stream for ", absl::FormatDuration(idle_timeout_),
                           " (the server's voice.stream_idle_timeout_ms); send audio, or close the stream")));
          WriteOrFinishLocked();
        } else {
          rearm = true;
        }
      }
    }
    if (rearm) ArmIdleAlarm();  // takes the next alarm's hold before this one is released
    // Deleting destroys the Alarm whose callback this is: gRPC keeps its state alive until the callback returns.
    ReleaseHold();
  }

  // Releases one hold (see the header's Lifetime note); the last one after OnDone deletes the reactor. Nothing
  // may touch `this` after it.
  void ReleaseHold() ABSL_LOCKS_EXCLUDED(mu_) {
    bool delete_now;
    {
      MutexLock lock(&mu_);
      delete_now = --holds_ == 0 && done_;
    }
    if (delete_now) delete this;
  }

  // The client finished sending: flush the decoder, then the session finishes its segment.
  void HalfClosed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (cancelled_) return FailLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the client cancelled the stream"));
    if (!voice_) {
      return FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                     "the stream ended before its streaming_config"));
    }
    std::vector<float> tail;
    if (absl::Status flushed = audio_decoder_->Finish(&tail); !flushed.ok()) return FailLocked(ToGrpcStatus(flushed));
    if (!Accept(tail)) return;
    session_->EndOfAudio(absl::Now());
  }

  // False (and the stream failed) when the audio passes the model's max_audio_seconds.
  bool Accept(const std::vector<float>& samples) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const ModelConfig& model = voice_->config();
    const int rate = voice_->recognizer->sample_rate();
    const double seconds = static_cast<double>(samples.size()) / rate;
    metrics_->RecordAudio(model, VoiceApi::kStreaming, seconds);
    const double total =
        static_cast<double>(session_->received_samples() + static_cast<int64_t>(samples.size())) / rate;
    if (total > model.speech->max_audio_seconds) {
      FailLocked(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                              absl::StrCat("the stream's audio passed max_audio_seconds (",
                                           model.speech->max_audio_seconds, " s) of model '", model.name, "'")));
      return false;
    }
    session_->AddAudio(samples, absl::Now());
    return true;
  }

  bool Backlogged() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return session_->backlog_samples() > kMaxBacklogWindows * window_samples_;
  }

  // A window to submit, numbered so that a handle coming back late is not stored for a later window.
  struct ScheduledWindow {
    StreamWindow window;
    uint64_t seq = 0;
  };

  // The next window to run (marked running, with its two holds taken), or a closing final result queued for
  // writing.
  std::optional<ScheduledWindow> NextWindowLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!session_ || window_running_ || finishing_) return std::nullopt;
    std::optional<StreamWindow> window = session_->NextWindow();
    if (window) {
      window_running_ = true;
      holds_ += 2;  // its completion's (OnWindow) and its submitter's (RunWindow)
      return ScheduledWindow{.window = *std::move(window), .seq = ++window_seq_};
    }
    if (std::optional<WindowOutcome> closing = session_->TakeClosingResult(absl::Now())) Deliver(*closing);
    WriteOrFinishLocked();
    return std::nullopt;
  }

  // On the ticker's thread (see EndStream for why the reactor is alive).
  void OnTick() ABSL_LOCKS_EXCLUDED(mu_) {
    std::optional<ScheduledWindow> window;
    {
      MutexLock lock(&mu_);
      if (done_ || finishing_ || !session_) return;
      session_->Tick();  // when to start a window on ticks is the session's rule (StreamingSessionOptions::ticked)
      window = NextWindowLocked();
      WriteOrFinishLocked();
    }
    RunWindow(std::move(window));
  }

  // Not under mu_: a refused window completes on this thread, inside Run (and may finish the stream, after which
  // OnDone may run on another thread: the submitter's hold keeps the reactor until this returns). Every window
  // continues the admitted stream, so none is refused for draining.
  void RunWindow(std::optional<ScheduledWindow> scheduled) ABSL_LOCKS_EXCLUDED(mu_) {
    if (!scheduled) return;
    const StreamWindow& window = scheduled->window;
    if (engine_ != nullptr) {  // its chunk joins the engine's next step (nothing to withdraw: a step is short)
      engine_->Submit(slot_, std::move(scheduled->window.samples), /*reset=*/window.start == 0,
                      [this](absl::StatusOr<WindowLogProbs> result) { OnWindow(std::move(result)); });
      ReleaseHold();
      return;
    }
    metrics_->RecordComputed(voice_->config(), VoiceApi::kStreaming,
                             static_cast<double>(window.end - window.start) / voice_->recognizer->sample_rate());
    if (recognizer_ != nullptr) {  // a whole recognition of the segment so far
      std::shared_ptr<RecognitionHandle> handle =
          recognizer_->Start(std::move(scheduled->window.samples), recognize_options_,
                             [this](absl::StatusOr<Recognition> result) { OnRecognized(std::move(result)); });
      {
        MutexLock lock(&mu_);
        if (window_running_ && window_seq_ == scheduled->seq) recognition_handle_ = std::move(handle);
      }
      ReleaseHold();
      return;
    }
    InferHandle handle =
        voice_->model->Run(std::move(scheduled->window.samples), deadline_, /*continues_admitted=*/true,
                          [this](absl::StatusOr<WindowLogProbs> result) { OnWindow(std::move(result)); });
    {
      MutexLock lock(&mu_);
      // Its completion may have come first (a refusal, or a fast batch): then the handle is stale.
      if (window_running_ && window_seq_ == scheduled->seq) window_handle_ = std::move(handle);
    }
    ReleaseHold();
  }

  // A window's completion (a scheduler thread, or RunWindow's inside Run), holding the window's hold until its
  // last step.
  void OnWindow(absl::StatusOr<WindowLogProbs> result) ABSL_LOCKS_EXCLUDED(mu_) {
    OnRunDone(result.status(), [&](StreamSession& session) { return session.OnWindowDone(*result, absl::Now()); });
  }

  // A recognition's completion (an engine's delivery thread, or RunWindow's inside Start), likewise.
  void OnRecognized(absl::StatusOr<Recognition> result) ABSL_LOCKS_EXCLUDED(mu_) {
    OnRunDone(result.status(),
              [&](StreamSession& session) { return session.OnRecognitionDone(*result, absl::Now()); });
  }

  // A recognition in flight that the session no longer needs (RunSuperseded), to cancel once mu_ is released; its
  // cancelled end is then the session's AbandonRun, not a refused window. Null when there is none (or its handle is
  // not stored yet: then it simply runs to its end).
  std::shared_ptr<RecognitionHandle> SupersededRunLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!window_running_ || !recognition_handle_ || !session_ || !session_->RunSuperseded()) return nullptr;
    abandoning_ = true;
    return recognition_handle_;
  }

  // Either completion: `outcome(session)` (called under mu_, only when `status` is OK) gives the results.
  template <typename Outcome>
  void OnRunDone(const absl::Status& status, Outcome outcome) ABSL_LOCKS_EXCLUDED(mu_) {
    std::optional<ScheduledWindow> next;
    {
      MutexLock lock(&mu_);
      window_running_ = false;
      window_handle_ = InferHandle();
      recognition_handle_.reset();
      const bool abandoned = abandoning_ && status.code() == absl::StatusCode::kCancelled && !cancelled_;
      abandoning_ = false;
      if (abandoned && !done_ && !finishing_) {
        session_->AbandonRun();
        next = NextWindowLocked();
        WriteOrFinishLocked();
      } else if (!done_ && !finishing_) {
        if (!status.ok()) {
          FailLocked(ToGrpcStatus(RefusedWindow(status)));
        } else if (absl::StatusOr<WindowOutcome> outcome_or = outcome(*session_); !outcome_or.ok()) {
          FailLocked(ToGrpcStatus(outcome_or.status()));
        } else {
          Deliver(*outcome_or);
          if (read_paused_ && !Backlogged()) {
            read_paused_ = false;
            StartReadLocked();
          }
          next = NextWindowLocked();
        }
        WriteOrFinishLocked();
      }
    }
    RunWindow(std::move(next));
    ArmIdleAlarm();
    ReleaseHold();
  }

  // A refused window ends the stream (see the header): the status says so and how far the stream got.
  absl::Status RefusedWindow(const absl::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::Status(status.code(),
                        absl::StrCat("model '", voice_->name(), "' refused a window of this stream (",
                                     status.message(), "); the stream ends after ", reported_processed_,
                                     " s of audio in final results: reconnect and resend the audio after them"));
  }

  void Deliver(const WindowOutcome& outcome) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const ModelConfig& config = voice_->config();
    for (absl::Duration latency : outcome.chunk_latencies) metrics_->RecordChunkLatency(config, latency);
    if (outcome.final_latency) metrics_->RecordFinalLatency(config, *outcome.final_latency);
    for (const StreamResult& result : outcome.results) {
      riva::StreamingRecognizeResponse& response = writes_.emplace_back();
      if (id_) *response.mutable_id() = *id_;
      riva::StreamingRecognitionResult* out = response.add_results();
      FillAlternative(result.transcript, word_times_, *out->add_alternatives());
      out->set_is_final(result.is_final);
      out->set_stability(result.stability);
      out->set_channel_tag(1);
      out->set_audio_processed(static_cast<float>(result.audio_processed));
      if (result.is_final) {
        const double newly = result.audio_processed - reported_processed_;
        metrics_->RecordProcessed(config, VoiceApi::kStreaming, newly, absl::Now());
        reported_processed_ = result.audio_processed;
      }
    }
  }

  void FailLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (failure_) return;
    failure_ = status;
    // Results not yet sent are dropped with the stream; the one being written stays at the front until
    // OnWriteDone pops it.
    writes_.erase(writes_.begin() + (writing_ && !writes_.empty() ? 1 : 0), writes_.end());
  }

  // Starts the next write, or finishes the call once everything is written (or the stream failed).
  void WriteOrFinishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finishing_) return;
    if (!failure_ && !writes_.empty()) {
      writing_ = true;
      SLUICE_TSAN_RELEASE(this);  // for OnWriteDone, on another thread
      StartWrite(&writes_.front());
      return;
    }
    const bool complete = session_ && session_->finished() && !window_running_;
    if (!failure_ && !complete) return;
    finishing_ = true;
    // The slot goes back before the client hears the end, so a client that opens its next stream at once finds
    // it free. Only with no chunk of the stream in the engine: ReleaseSlot would complete a queued one here, under
    // mu_ (EndStream releases it then).
    if (slot_held_ && !window_running_) {
      engine_->ReleaseSlot(slot_);
      slot_held_ = false;
    }
    const grpc::Status status = failure_.value_or(grpc::Status::OK);
    finish_code_ = static_cast<int>(status.error_code());
    SLUICE_TSAN_RELEASE(this);  // for OnDone, on another thread
    Finish(status);
  }

  ModelHub* const hub_;
  VoiceModels* const models_;
  VoiceMetrics* const metrics_;
  DecodeExecutor* const decodes_;
  const StreamEngines* const engines_;
  WindowTickers* const tickers_;
  const absl::Duration idle_timeout_;
  absl::Time deadline_ = absl::InfiniteFuture();
  riva::StreamingRecognizeRequest request_;  // the one outstanding read's target

  Mutex mu_;
  // Written once, under mu_, by Configure (before any window exists); read-only after, so RunWindow reads it
  // without the lock.
  const VoiceModel* voice_ = nullptr;
  // Likewise (set with voice_ for a model with a stream engine): the engine and the stream's slot in it.
  StreamEngine* engine_ = nullptr;
  int slot_ = -1;
  // Likewise (set for an encoder-decoder model): its recognizer, and the options every run of the stream takes.
  const Recognizer* recognizer_ = nullptr;
  RecognizeOptions recognize_options_;
  // Likewise, for every model: its largest bucket (flow control's unit).
  int64_t window_samples_ = 0;
  // Likewise (set for a windowed model with speech.streaming.shared_tick): its ticker and this stream's entry.
  WindowTicker* ticker_ = nullptr;
  int64_t tick_id_ = 0;
  bool slot_held_ ABSL_GUARDED_BY(mu_) = false;  // slot_ not yet given back
  bool word_times_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<nvidia::riva::RequestId> id_ ABSL_GUARDED_BY(mu_);
  // Used under mu_, except by an offloaded decode while decoding_ (no read is outstanding then, so nothing else
  // uses it).
  std::unique_ptr<StreamingAudioDecoder> audio_decoder_;
  bool decoding_ ABSL_GUARDED_BY(mu_) = false;
  DecodeTicket decode_ticket_ ABSL_GUARDED_BY(mu_) = 0;  // the offloaded decode's, while decoding_
  bool reading_ ABSL_GUARDED_BY(mu_) = false;  // a read is outstanding, since read_started_
  absl::Time read_started_ ABSL_GUARDED_BY(mu_);
  bool alarm_pending_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<grpc::Alarm> idle_alarm_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<StreamSession> session_ ABSL_GUARDED_BY(mu_);
  AdmittedCall admitted_ ABSL_GUARDED_BY(mu_);  // set by Configure, released by OnDone
  bool window_running_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t window_seq_ ABSL_GUARDED_BY(mu_) = 0;  // the running (or last) window's number
  InferHandle window_handle_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<RecognitionHandle> recognition_handle_ ABSL_GUARDED_BY(mu_);  // a recognized stream's run
  bool abandoning_ ABSL_GUARDED_BY(mu_) = false;  // that run was cancelled as superseded (SupersededRunLocked)
  // Work in flight outside gRPC's reactions that uses `this`: two per running window, one per offloaded decode,
  // one per pending idle alarm (the header's Lifetime note).
  int holds_ ABSL_GUARDED_BY(mu_) = 0;
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<riva::StreamingRecognizeResponse> writes_ ABSL_GUARDED_BY(mu_);  // front: being written
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<grpc::Status> failure_ ABSL_GUARDED_BY(mu_);
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  int finish_code_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  double reported_processed_ ABSL_GUARDED_BY(mu_) = 0;
};

class RefusedStream final
    : public grpc::ServerBidiReactor<riva::StreamingRecognizeRequest, riva::StreamingRecognizeResponse> {
 public:
  explicit RefusedStream(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

grpc::ServerBidiReactor<riva::StreamingRecognizeRequest, riva::StreamingRecognizeResponse>* RefuseStream(
    const grpc::Status& status) {
  return new RefusedStream(status);
}

grpc::ServerBidiReactor<riva::StreamingRecognizeRequest, riva::StreamingRecognizeResponse>* StartStreamingRecognize(
    grpc::CallbackServerContext* context, const StreamingDeps& deps) {
  return new StreamingReactor(context, deps);
}

}  // namespace sluice::voice
