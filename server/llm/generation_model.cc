#include "server/llm/generation_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "server/llm/generation_metrics.h"
#include "server/llm/stop_matcher.h"
#include "server/core/serving_state.h"

namespace sluice {
namespace {

constexpr size_t kMaxStopStrings = 4;

// The state of one accepted call, shared by the engine's two callbacks. The engine calls on_token in order and
// on_done last, never concurrently (generation_request.h), so it needs no lock.
class CallState {
 public:
  CallState(const Tokenizer* tokenizer, std::shared_ptr<GenerationSink> sink, std::vector<std::string> stops,
            std::string echo_text, int prompt_tokens, GenerationMetrics* metrics, Clock* clock)
      : detokenizer_(tokenizer),
        sink_(std::move(sink)),
        stops_(std::move(stops)),
        echo_text_(std::move(echo_text)),
        prompt_tokens_(prompt_tokens),
        metrics_(metrics),
        clock_(clock),
        accepted_(clock->Now()) {}

  bool OnToken(const GeneratedToken& token) {
    if (metrics_ != nullptr) {
      if (token.index == 0) {
        metrics_->RecordFirstToken(token.produced - accepted_, token.cached_prompt_tokens > 0);
      } else {
        metrics_->RecordInterToken(token.produced - last_token_);
      }
    }
    last_token_ = token.produced;
    GenerationDelta delta;
    delta.token_ids.push_back(token.id);
    if (token.index == 0) delta.text = std::move(echo_text_);
    delta.text += stops_.Push(detokenizer_.Add(token.id));
    if (!sink_->OnDelta(delta)) {
      client_gone_ = true;
      return false;
    }
    return !stops_.stopped();
  }

  void OnDone(GenerationResult result) {
    GenerationDelta last;
    if (!client_gone_ && !stops_.stopped()) {
      last.text = stops_.Push(detokenizer_.Flush());
      last.text += stops_.Finish();
    }
    if (!last.text.empty() && !sink_->OnDelta(last)) client_gone_ = true;
    GenerationSummary summary;
    summary.status = result.status;
    summary.finish = result.finish;
    if (client_gone_) {
      summary.status = absl::CancelledError("the client went away");
      summary.finish = FinishReason::kCancelled;
    }
    summary.prompt_tokens = prompt_tokens_;
    summary.completion_tokens = result.output_tokens;
    if (metrics_ != nullptr) {
      metrics_->RecordFinished(summary.status, clock_->Now() - accepted_, result.queue_time, prompt_tokens_,
                               result.output_tokens);
    }
    sink_->OnDone(summary);
  }

 private:
  IncrementalDetokenizer detokenizer_;
  std::shared_ptr<GenerationSink> sink_;
  StopMatcher stops_;
  std::string echo_text_;
  const int prompt_tokens_;
  GenerationMetrics* const metrics_;
  Clock* const clock_;
  const absl::Time accepted_;
  absl::Time last_token_;
  bool client_gone_ = false;
};

const std::string* RolePrefix(const ChatTemplate& chat, const std::string& role) {
  if (role == "system") return &chat.system;
  if (role == "user") return &chat.user;
  if (role == "assistant") return &chat.assistant;
  return nullptr;
}

GenerationSummary Refusal(const absl::Status& status) {
  GenerationSummary summary;
  summary.status = status;
  summary.finish = absl::IsCancelled(status) ? FinishReason::kCancelled : FinishReason::kError;
  return summary;
}

}  // namespace

void GenerationTicket::Cancel() {
  ContinuousBatcher* batcher = nullptr;
  SequenceId id = 0;
  {
    MutexLock lock(&mu_);
    cancelled_ = true;
    batcher = batcher_;
    id = id_;
  }
  if (batcher != nullptr) batcher->Cancel(id);  // may call OnDone on this thread: no lock held
}

bool GenerationTicket::cancelled() {
  MutexLock lock(&mu_);
  return cancelled_;
}

bool GenerationTicket::Enqueued(ContinuousBatcher* batcher, SequenceId id) {
  MutexLock lock(&mu_);
  batcher_ = batcher;
  id_ = id;
  return cancelled_;
}

absl::StatusOr<std::unique_ptr<GenerationModel>> GenerationModel::Create(const GenerationModelOptions& options) {
  const ModelConfig& config = *options.config;
  if (!config.generation) {
    return absl::InvalidArgumentError(absl::StrCat("model ", config.name, " is not a generation model"));
  }
  std::unique_ptr<GenerationModel> model(new GenerationModel());
  model->config_ = options.config;
  model->state_ = options.state;
  model->clock_ = options.clock;
  SLUICE_ASSIGN_OR_RETURN(model->tokenizer_, Tokenizer::Load(config.generation->tokenizer_path));
  if (model->tokenizer_->vocab_size() > config.generation->vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", config.name, ": its tokenizer has ", model->tokenizer_->vocab_size(),
        " pieces, more than the model's vocab_size ", config.generation->vocab_size));
  }
  // The byte bound. Every token of a tokenized prompt covers at most as many input bytes as its piece has: with
  // the normalisation sluice's tokenizers use (identity, whitespace kept, byte fallback; backend/compile/
  // llm_tokenizer.py) input bytes map one to one onto piece bytes, except that a space becomes the 3-byte
  // U+2581 (a piece covers fewer input bytes than its length) and a byte-fallback piece "<0xAB>" covers one byte.
  // So a text longer than longest piece x the largest prompt bucket cannot fit, and is refused without tokenizing.
  // (A normaliser that deletes input, e.g. collapsing runs of spaces, would break this; none is used.)
  // A tokenizer.json reports its own bound (hf_tokenizer.h), or none (-1): then only the request size limits bound
  // the text, and the token count is checked after tokenizing.
  model->max_prompt_bytes_ =
      model->tokenizer_->max_piece_bytes() < 0
          ? std::numeric_limits<int64_t>::max()
          : static_cast<int64_t>(std::max(1, model->tokenizer_->max_piece_bytes())) *
                config.generation->max_prompt_length();
  SLUICE_RETURN_IF_ERROR(model->LoadJinjaTemplate(config));
  model->prep_ = std::make_unique<PrepQueue>(std::max(1, config.generation->max_queue_size));
  if (options.metrics != nullptr) {
    model->owned_metrics_ = std::make_unique<GenerationMetrics>(config, options.metrics);
    model->metrics_ = model->owned_metrics_.get();
  }
  ContinuousBatcherOptions engine;
  engine.model = options.config;
  engine.instances = options.instances;
  engine.clock = options.clock;
  if (model->metrics_ != nullptr) {
    engine.observer = [metrics = model->metrics_](const GenerationStepReport& step) { metrics->RecordStep(step); };
  }
  SLUICE_ASSIGN_OR_RETURN(model->engine_, ContinuousBatcher::Create(engine));
  if (model->metrics_ != nullptr) model->metrics_->AttachEngine(model->engine_.get());
  return model;
}

// The model-directory contract for Hugging Face checkpoints: tokenizer_config.json lies beside tokenizer.json.
absl::Status GenerationModel::LoadJinjaTemplate(const ModelConfig& config) {
  hf_tokenizer_ = dynamic_cast<const HfTokenizer*>(tokenizer_.get());
  if (hf_tokenizer_ == nullptr) return absl::OkStatus();
  const std::filesystem::path path =
      std::filesystem::path(config.generation->tokenizer_path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<JinjaChatTemplate>> loaded = JinjaChatTemplate::Load(path.string());
  if (absl::IsNotFound(loaded.status())) return absl::OkStatus();  // no chat_template: the simple one serves chat
  if (!loaded.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", config.name, ": ", loaded.status().message()));
  }
  jinja_template_ = *std::move(loaded);
  return absl::OkStatus();
}

GenerationModel::~GenerationModel() {
  if (prep_) prep_->WaitIdle();  // jobs being prepared use the engine, the tokenizer and the metrics
  if (engine_) engine_->Stop();
}

bool GenerationModel::ready() const { return state_->ready() && engine_->InstancesInRotation() > 0; }

void GenerationModel::Stop() {
  prep_->WaitIdle();  // what is being prepared is enqueued (or refused) first, then drained with the rest
  engine_->Stop();
}

void GenerationModel::Refuse(const absl::Status& status, GenerationSink& sink) {
  if (metrics_ != nullptr) metrics_->RecordRefused(status);
  sink.OnDone(Refusal(status));
}

absl::Status GenerationModel::CheckSizes(const GenerationCall& call) const {
  const GenerationOptions& options = *config_->generation;
  const int inputs = call.prompt.has_value() + call.prompt_ids.has_value() + call.messages.has_value();
  if (inputs != 1) {
    return WithRequestField(absl::InvalidArgumentError(inputs == 0
                                                           ? "the request has no prompt (or messages)"
                                                           : "give exactly one of prompt, prompt token ids or messages"),
                            call.messages ? "messages" : "prompt");
  }
  if (call.prompt_ids && static_cast<int64_t>(call.prompt_ids->size()) > options.max_prompt_length()) {
    return WithRequestField(
        absl::InvalidArgumentError(absl::StrCat("the prompt is ", call.prompt_ids->size(), " tokens; model ",
                                                config_->name, " takes prompts of at most ",
                                                options.max_prompt_length(), " tokens")),
        "prompt");
  }
  int64_t bytes = call.prompt ? static_cast<int64_t>(call.prompt->size()) : 0;
  if (call.messages && jinja_template_) {  // the contents' bytes: the template adds to them (never drops, in practice)
    bytes = 0;
    for (const ChatMessage& message : *call.messages) bytes += static_cast<int64_t>(message.content.size());
  } else if (call.messages) {  // the rendered text's length, exactly (an unknown role is refused when rendering)
    const ChatTemplate& chat = options.chat_template;
    bytes = static_cast<int64_t>(chat.assistant.size());
    for (const ChatMessage& message : *call.messages) {
      const std::string* prefix = RolePrefix(chat, message.role);
      bytes += static_cast<int64_t>((prefix ? prefix->size() : 0) + message.content.size() + chat.separator.size());
    }
  }
  if (bytes > max_prompt_bytes_) {
    return WithRequestField(
        absl::InvalidArgumentError(absl::StrCat(
            "the prompt is ", bytes, " bytes; model ", config_->name, " takes prompts of at most ",
            max_prompt_bytes_, " bytes (", options.max_prompt_length(), " tokens of at most ",
            tokenizer_->max_piece_bytes(), " bytes each); a longer text cannot fit its largest prompt bucket")),
        call.messages ? "messages" : "prompt");
  }
  if (call.stop.size() > kMaxStopStrings) {
    return WithRequestField(absl::InvalidArgumentError(absl::StrCat("at most ", kMaxStopStrings,
                                                                    " stop strings are allowed (got ",
                                                                    call.stop.size(), ")")),
                            "stop");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> GenerationModel::PromptIds(const GenerationCall& call) const {
  const GenerationOptions& options = *config_->generation;
  if (call.prompt_ids) return *call.prompt_ids;
  if (call.messages && jinja_template_) return JinjaPromptIds(*call.messages);
  std::string text;
  if (call.prompt) {
    text = *call.prompt;
  } else {
    if (call.messages->empty()) return WithRequestField(absl::InvalidArgumentError("messages is empty"), "messages");
    const ChatTemplate& chat = options.chat_template;
    for (size_t i = 0; i < call.messages->size(); ++i) {
      const ChatMessage& message = (*call.messages)[i];
      const std::string* prefix = RolePrefix(chat, message.role);
      if (prefix == nullptr) {
        return WithRequestField(absl::InvalidArgumentError(absl::StrCat(
                                    "messages[", i, "].role '", message.role, "' is not one of system, user, assistant")),
                                "messages");
      }
      absl::StrAppend(&text, *prefix, message.content, chat.separator);
    }
    text += chat.assistant;
  }
  std::vector<int32_t> ids;
  if (options.bos_token_id >= 0) ids.push_back(options.bos_token_id);
  absl::StatusOr<std::vector<int32_t>> encoded = tokenizer_->Tokenize(text, SpecialTokens::kAsText);
  if (!encoded.ok()) return WithRequestField(encoded.status(), call.messages ? "messages" : "prompt");
  ids.insert(ids.end(), encoded->begin(), encoded->end());
  return ids;
}

absl::StatusOr<std::vector<int32_t>> GenerationModel::JinjaPromptIds(const std::vector<ChatMessage>& messages) const {
  if (messages.empty()) return WithRequestField(absl::InvalidArgumentError("messages is empty"), "messages");
  std::vector<ChatTurn> turns;
  turns.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    if (std::optional<std::string> special = hf_tokenizer_->FindSpecialToken(messages[i].content)) {
      return WithRequestField(
          absl::InvalidArgumentError(absl::StrCat("messages[", i, "].content contains the special token '", *special,
                                                  "' of model ", config_->name,
                                                  "'s tokenizer; special tokens come only from its chat template")),
          "messages");
    }
    turns.push_back(ChatTurn{messages[i].role, messages[i].content});
  }
  absl::StatusOr<std::string> text = jinja_template_->Render(turns, /*add_generation_prompt=*/true);
  if (absl::IsInvalidArgument(text.status())) return WithRequestField(text.status(), "messages");
  if (!text.ok()) {
    return absl::InternalError(absl::StrCat("model ", config_->name, ": ", text.status().message()));
  }
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer_->Tokenize(*text, SpecialTokens::kRecognized);
  if (!ids.ok()) return WithRequestField(ids.status(), "messages");
  return ids;
}

absl::Status GenerationModel::CheckCall(const GenerationCall& call, const std::vector<int32_t>& prompt,
                                        int& max_tokens) const {
  const GenerationOptions& options = *config_->generation;
  const auto bad = [](absl::string_view field, std::string message) {
    return WithRequestField(absl::InvalidArgumentError(message), field);
  };
  if (prompt.empty()) return bad("prompt", "the prompt is empty");
  const int64_t prompt_length = static_cast<int64_t>(prompt.size());
  if (prompt_length > options.max_prompt_length()) {
    return bad(call.messages ? "messages" : "prompt",
               absl::StrCat("the prompt is ", prompt_length, " tokens; model ", config_->name,
                            " takes prompts of at most ", options.max_prompt_length(), " tokens"));
  }
  if (call.prompt_ids) {
    for (size_t i = 0; i < prompt.size(); ++i) {
      if (prompt[i] < 0 || prompt[i] >= options.vocab_size) {
        return bad("prompt", absl::StrCat("prompt token ", i, " is id ", prompt[i], ", outside model ", config_->name,
                                          "'s vocabulary [0, ", options.vocab_size, ")"));
      }
    }
  }
  const int64_t room = options.context_length - prompt_length;
  if (call.max_tokens) {
    if (*call.max_tokens < 1) {
      return bad("max_tokens", absl::StrCat("max_tokens must be at least 1 (got ", *call.max_tokens, ")"));
    }
    if (*call.max_tokens > room) {
      return bad("max_tokens", absl::StrCat("the prompt (", prompt_length, " tokens) plus max_tokens (",
                                            *call.max_tokens, ") exceeds model ", config_->name, "'s context of ",
                                            options.context_length, " tokens"));
    }
    max_tokens = static_cast<int>(*call.max_tokens);
  } else {
    if (room < 1) {
      return bad("prompt", absl::StrCat("the prompt (", prompt_length, " tokens) fills model ", config_->name,
                                        "'s context of ", options.context_length, " tokens"));
    }
    max_tokens = static_cast<int>(std::min<int64_t>(options.default_max_tokens, room));
  }
  const SamplingParams& s = call.sampling;
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f) {
    return bad("temperature",
               absl::StrCat("temperature is ", s.temperature, "; it must be a finite number >= 0 (0: greedy)"));
  }
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f)) {  // also refuses NaN
    return bad("top_p", absl::StrCat("top_p is ", s.top_p, "; it must be in (0, 1]"));
  }
  if (s.top_k < 0) return bad("top_k", absl::StrCat("top_k is ", s.top_k, "; it must be >= 0 (0: no limit)"));
  for (const std::string& stop : call.stop) {
    if (stop.empty()) return bad("stop", "a stop string must not be empty");
  }
  return absl::OkStatus();
}

GenerationHandle GenerationModel::Generate(absl::StatusOr<GenerationCall> call,
                                           std::shared_ptr<GenerationSink> sink) {
  absl::Status refused = call.status();
  if (refused.ok() && !state_->ready()) {
    refused = absl::UnavailableError(state_->draining() ? "the server is draining; not accepting new requests"
                                                        : "the server is loading its models; not ready yet");
  }
  if (refused.ok()) refused = CheckSizes(*call);
  if (!refused.ok()) {
    Refuse(refused, *sink);
    return GenerationHandle();
  }
  auto ticket = std::make_shared<GenerationTicket>();
  auto job = [this, call = std::make_shared<GenerationCall>(*std::move(call)), sink, ticket] {
    Prepare(*call, sink, *ticket);
  };
  if (!prep_->TrySubmit(std::move(job))) {
    Refuse(absl::ResourceExhaustedError(absl::StrCat("model ", config_->name, " has ",
                                                     config_->generation->max_queue_size,
                                                     " prompts being tokenized (max_queue_size); try again")),
           *sink);
    return GenerationHandle();
  }
  return GenerationHandle(std::move(ticket));
}

void GenerationModel::Prepare(GenerationCall& call, const std::shared_ptr<GenerationSink>& sink,
                              GenerationTicket& ticket) {
  if (ticket.cancelled()) return Refuse(absl::CancelledError("the client went away before generation began"), *sink);
  absl::StatusOr<std::vector<int32_t>> prompt = PromptIds(call);
  int max_tokens = 0;
  absl::Status refused = prompt.status();
  if (refused.ok()) refused = CheckCall(call, *prompt, max_tokens);
  if (!refused.ok()) return Refuse(refused, *sink);
  std::string echo_text;
  if (call.echo && call.prompt) echo_text = std::move(*call.prompt);
  const int prompt_tokens = static_cast<int>(prompt->size());
  auto state = std::make_shared<CallState>(tokenizer_.get(), sink, std::move(call.stop), std::move(echo_text),
                                           prompt_tokens, metrics_, clock_);
  GenerationRequest request;
  request.prompt = *std::move(prompt);
  request.max_tokens = max_tokens;
  request.sampling = call.sampling;
  request.ignore_eos = call.ignore_eos;
  request.deadline = call.deadline;
  request.on_token = [state](const GeneratedToken& token) { return state->OnToken(token); };
  request.on_done = [state](GenerationResult result) { state->OnDone(std::move(result)); };
  absl::StatusOr<SequenceId> id = engine_->Enqueue(std::move(request));
  if (!id.ok()) return Refuse(id.status(), *sink);
  if (ticket.Enqueued(engine_.get(), *id)) engine_->Cancel(*id);  // the client went while it was prepared
}

}  // namespace sluice
