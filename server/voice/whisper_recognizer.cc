#include "server/voice/whisper_recognizer.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <span>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "backend/base/sync.h"

namespace sluice::voice {
namespace {

// What Start returns for a call it refused (already answered): Cancel has nothing to withdraw.
class RefusedRecognition final : public RecognitionHandle {
 public:
  void Cancel() override {}
};

}  // namespace

// One recording between Start and its answer: its windows, each encoded then decoded (see the header). Every
// callback holds a shared_ptr to it; `done` is called once, when the last window finishes or the first fails.
class WhisperRecognizer::Recording final : public RecognitionHandle,
                                           public std::enable_shared_from_this<Recording> {
 public:
  Recording(const WhisperRecognizer* recognizer, std::optional<int> language, absl::Time deadline,
            double audio_seconds, int windows, RecognitionDone done)
      : r_(*recognizer),
        language_(language),
        deadline_(deadline),
        audio_seconds_(audio_seconds),
        done_(std::move(done)),
        windows_(windows) {}

  // Queues window `index` (samples [offset, offset + samples.size()) of the recording) on the encoder.
  void Encode(int index, int64_t offset_samples, std::vector<float> samples) {
    const ModelConfig& config = r_.config();
    {
      MutexLock lock(&mu_);
      Window& w = windows_[index];
      w.start_ms = offset_samples * 1000 / r_.sample_rate();
      w.end_ms = (offset_samples + static_cast<int64_t>(samples.size())) * 1000 / r_.sample_rate();
    }
    InferCall call;
    std::string& bytes = call.storage.emplace_back(samples.size() * sizeof(float), '\0');
    std::memcpy(bytes.data(), samples.data(), bytes.size());
    call.inputs.push_back(WireTensor{.name = config.inputs.front().name,
                                     .datatype = "FP32",
                                     .shape = {1, static_cast<int64_t>(samples.size())},
                                     .bytes = std::string_view(bytes)});
    call.requested_outputs.push_back(config.speech->output);
    call.transport_deadline = deadline_;
    call.continues_admitted = true;  // the caller holds the call's admission until done
    InferHandle handle = r_.encoder_->Infer(
        std::move(call), [self = shared_from_this(), index](absl::StatusOr<InferResult> result) {
          self->Encoded(index, std::move(result));
        });
    bool cancel = false;
    {
      MutexLock lock(&mu_);
      windows_[index].encoder = handle;
      cancel = cancelled_;
    }
    if (cancel) handle.Cancel();
  }

  bool answered() {
    MutexLock lock(&mu_);
    return answered_;
  }

  void Cancel() override {
    std::vector<InferHandle> encoders;
    std::vector<SequenceId> sequences;
    {
      MutexLock lock(&mu_);
      if (cancelled_ || answered_) return;
      cancelled_ = true;
      for (const Window& w : windows_) {
        if (w.encoder) encoders.push_back(*w.encoder);
        if (w.sequence) sequences.push_back(*w.sequence);
      }
    }
    for (const InferHandle& handle : encoders) handle.Cancel();
    for (SequenceId id : sequences) r_.decoder_->Cancel(id);
    Fail(absl::CancelledError("the recognition was cancelled"));
  }

 private:
  struct Window {
    int64_t start_ms = 0;
    int64_t end_ms = 0;
    std::optional<InferHandle> encoder;
    std::optional<SequenceId> sequence;  // the decoder sequence now running for it
    std::shared_ptr<const std::vector<float>> hidden;
    int language = -1;
    std::vector<int32_t> tokens;
    bool finished = false;
  };

  // On a scheduler thread (or the caller's, for a refusal): the window's encoder output, then its decoding.
  void Encoded(int index, absl::StatusOr<InferResult> result) {
    if (!result.ok()) {
      Fail(result.status());
      return;
    }
    if (answered()) return;  // another window failed, or the call was cancelled
    const HostTensor& tensor = result->outputs.front().tensor;  // [1, positions, hidden]
    std::span<const float> values = tensor.values<float>();
    auto hidden = std::make_shared<const std::vector<float>>(values.begin(), values.end());
    {
      MutexLock lock(&mu_);
      windows_[index].hidden = hidden;
    }
    if (language_) {
      Transcribe(index, *language_);
    } else {
      DetectLanguage(index);
    }
  }

  // A one-token sequence restricted to the language tokens: Whisper's language detection.
  void DetectLanguage(int index) {
    const WhisperOptions& w = r_.config().speech->whisper;
    GenerationRequest request = BaseRequest(index);
    request.prompt = {w.start_token_id};
    request.max_tokens = 1;
    request.allowed_token_ids.assign(w.language_token_ids.begin(), w.language_token_ids.end());
    request.on_token = [self = shared_from_this(), index](const GeneratedToken& token) {
      MutexLock lock(&self->mu_);
      self->windows_[index].language = token.id;
      return true;
    };
    request.on_done = [self = shared_from_this(), index](GenerationResult result) {
      if (!result.status.ok()) {
        self->Fail(result.status);
        return;
      }
      int language = -1;
      {
        MutexLock lock(&self->mu_);
        if (self->answered_) return;
        language = self->windows_[index].language;
      }
      self->Transcribe(index, language);
    };
    Enqueue(index, std::move(request));
  }

  void Transcribe(int index, int language) {
    const WhisperOptions& w = r_.config().speech->whisper;
    const GenerationOptions& g = *r_.config().generation;
    GenerationRequest request = BaseRequest(index);
    request.prompt = {w.start_token_id, language, w.transcribe_token_id, w.no_timestamps_token_id};
    // Bounded by the KV length, as Whisper's max_length (448: the prompt included).
    request.max_tokens = static_cast<int>(g.context_length - static_cast<int64_t>(request.prompt.size()));
    request.suppressed_token_ids.assign(w.suppress_tokens.begin(), w.suppress_tokens.end());
    request.first_step_suppressed_ids.assign(w.begin_suppress_tokens.begin(), w.begin_suppress_tokens.end());
    {
      MutexLock lock(&mu_);
      windows_[index].language = language;
    }
    request.on_token = [self = shared_from_this(), index](const GeneratedToken& token) {
      MutexLock lock(&self->mu_);
      self->windows_[index].tokens.push_back(token.id);
      return true;
    };
    request.on_done = [self = shared_from_this(), index](GenerationResult result) {
      if (!result.status.ok()) {
        self->Fail(result.status);
        return;
      }
      self->Finished(index);
    };
    Enqueue(index, std::move(request));
  }

  GenerationRequest BaseRequest(int index) {
    GenerationRequest request;
    request.deadline = deadline_;
    MutexLock lock(&mu_);
    request.encoder_output = windows_[index].hidden;
    return request;
  }

  void Enqueue(int index, GenerationRequest request) {
    absl::StatusOr<SequenceId> id = r_.decoder_->Enqueue(std::move(request));
    if (!id.ok()) {  // refused: on_done is never called
      Fail(id.status());
      return;
    }
    bool cancel = false;
    {
      MutexLock lock(&mu_);
      windows_[index].sequence = *id;
      cancel = cancelled_;
    }
    if (cancel) r_.decoder_->Cancel(*id);
  }

  void Finished(int index) {
    RecognitionDone done;
    Recognition recognition;
    {
      MutexLock lock(&mu_);
      windows_[index].finished = true;
      windows_[index].sequence.reset();
      if (answered_ || !std::all_of(windows_.begin(), windows_.end(), [](const Window& w) { return w.finished; })) {
        return;
      }
      answered_ = true;
      done = std::move(done_);
      recognition = AssembleLocked();
    }
    done(std::move(recognition));
  }

  Recognition AssembleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Recognition recognition;
    std::vector<std::string> texts;
    for (const Window& w : windows_) {
      std::string text(absl::StripAsciiWhitespace(r_.tokenizer_->Decode(w.tokens)));  // specials decode to nothing
      recognition.model_runs += 1 + static_cast<int64_t>(w.tokens.size()) + (language_ ? 0 : 1);
      if (text.empty()) continue;
      recognition.segments.push_back(TranscriptSegment{w.start_ms, w.end_ms, text});
      texts.push_back(std::move(text));
    }
    recognition.transcript.text = absl::StrJoin(texts, " ");
    recognition.language = windows_.empty() ? "" : r_.LanguageOf(windows_.front().language);
    recognition.audio_seconds = audio_seconds_;
    return recognition;
  }

  // The first error answers the recording; later windows' results are dropped (their work is withdrawn).
  void Fail(absl::Status status) {
    RecognitionDone done;
    std::vector<InferHandle> encoders;
    std::vector<SequenceId> sequences;
    {
      MutexLock lock(&mu_);
      if (answered_) return;
      answered_ = true;
      done = std::move(done_);
      for (Window& w : windows_) {
        if (w.encoder && !w.hidden) encoders.push_back(*w.encoder);
        if (w.sequence && !w.finished) sequences.push_back(*w.sequence);
      }
    }
    for (const InferHandle& handle : encoders) handle.Cancel();
    for (SequenceId id : sequences) r_.decoder_->Cancel(id);
    done(std::move(status));
  }

  const WhisperRecognizer& r_;
  const std::optional<int> language_;  // absent: detected per window
  const absl::Time deadline_;
  const double audio_seconds_;
  Mutex mu_;
  RecognitionDone done_ ABSL_GUARDED_BY(mu_);
  std::vector<Window> windows_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool answered_ ABSL_GUARDED_BY(mu_) = false;
};

absl::StatusOr<std::unique_ptr<WhisperRecognizer>> WhisperRecognizer::Create(ServedModel* encoder,
                                                                              ContinuousBatcher* decoder) {
  const ModelConfig& config = encoder->config();
  if (!config.is_encoder_decoder() || !config.speech || config.speech->recognizer != RecognizerKind::kWhisper) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", config.name, "' is not a Whisper model (speech.recognizer whisper + generation:)"));
  }
  if (decoder == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("model '", config.name, "' has no decoder engine"));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(config.generation->tokenizer_path);
  if (!tokenizer.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("model '", config.name, "': its tokenizer: ", tokenizer.status().message()));
  }
  return std::unique_ptr<WhisperRecognizer>(new WhisperRecognizer(encoder, decoder, *std::move(tokenizer)));
}

absl::StatusOr<int> WhisperRecognizer::LanguageToken(std::string_view language) const {
  const WhisperOptions& w = config().speech->whisper;
  // A BCP-47 tag's primary subtag ("en-US" -> "en").
  std::string code = absl::AsciiStrToLower(std::string(language.substr(0, language.find_first_of("-_"))));
  for (size_t i = 0; i < w.languages.size(); ++i) {
    if (w.languages[i] == code) return w.language_token_ids[i];
  }
  return absl::InvalidArgumentError(absl::StrCat("language '", std::string(language), "' is not one model '",
                                                 config().name, "' knows (ISO-639-1 codes: ",
                                                 absl::StrJoin(w.languages, ", "), ")"));
}

std::string WhisperRecognizer::LanguageOf(int token) const {
  const WhisperOptions& w = config().speech->whisper;
  for (size_t i = 0; i < w.languages.size(); ++i) {
    if (w.language_token_ids[i] == token) return w.languages[i];
  }
  return "";
}

std::shared_ptr<RecognitionHandle> WhisperRecognizer::Start(std::vector<float> audio,
                                                            const RecognizeOptions& options,
                                                            RecognitionDone done) const {
  const ModelConfig& model = config();
  if (options.temperature != 0) {
    done(absl::InvalidArgumentError(absl::StrCat("temperature ", options.temperature, ": model '", model.name,
                                                 "' decodes greedily only (temperature 0)")));
    return std::make_shared<RefusedRecognition>();
  }
  std::optional<int> language;
  if (!options.language.empty()) {
    absl::StatusOr<int> token = LanguageToken(options.language);
    if (!token.ok()) {
      done(token.status());
      return std::make_shared<RefusedRecognition>();
    }
    language = *token;
  }
  const double seconds = static_cast<double>(audio.size()) / sample_rate();
  if (audio.empty() || seconds > model.speech->max_audio_seconds) {
    done(absl::InvalidArgumentError(absl::StrCat("the audio is ", seconds, " s long; model '", model.name,
                                                 "' takes 0 < seconds <= ", model.speech->max_audio_seconds,
                                                 " (speech.max_audio_seconds)")));
    return std::make_shared<RefusedRecognition>();
  }
  const int64_t window = model.max_length();  // the 30 s bucket
  const int64_t total = static_cast<int64_t>(audio.size());
  const int windows = static_cast<int>((total + window - 1) / window);
  auto recording = std::make_shared<Recording>(this, language, options.deadline, seconds, windows, std::move(done));
  for (int i = 0; i < windows && !recording->answered(); ++i) {
    const int64_t begin = i * window, end = std::min(total, begin + window);
    recording->Encode(i, begin, std::vector<float>(audio.begin() + begin, audio.begin() + end));
  }
  return recording;
}

}  // namespace sluice::voice
