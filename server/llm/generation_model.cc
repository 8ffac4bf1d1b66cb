#include "server/llm/generation_model.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "server/llm/generation_metrics.h"
#include "server/llm/stop_matcher.h"
#include "server/served_model.h"

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
        metrics_->RecordFirstToken(token.produced - accepted_);
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

}  // namespace

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

GenerationModel::~GenerationModel() {
  if (engine_) engine_->Stop();
}

bool GenerationModel::ready() const { return state_->ready() && engine_->InstancesInRotation() > 0; }

void GenerationModel::Stop() { engine_->Stop(); }

absl::StatusOr<std::vector<int32_t>> GenerationModel::PromptIds(const GenerationCall& call) const {
  const GenerationOptions& options = *config_->generation;
  const int inputs = call.prompt.has_value() + call.prompt_ids.has_value() + call.messages.has_value();
  if (inputs != 1) {
    return absl::InvalidArgumentError(inputs == 0 ? "the request has no prompt (or messages)"
                                                  : "give exactly one of prompt, prompt token ids or messages");
  }
  if (call.prompt_ids) return *call.prompt_ids;
  std::string text;
  if (call.prompt) {
    text = *call.prompt;
  } else {
    if (call.messages->empty()) return absl::InvalidArgumentError("messages is empty");
    const ChatTemplate& chat = options.chat_template;
    for (size_t i = 0; i < call.messages->size(); ++i) {
      const ChatMessage& message = (*call.messages)[i];
      const std::string* prefix = RolePrefix(chat, message.role);
      if (prefix == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("messages[", i, "].role '", message.role,
                                                       "' is not one of system, user, assistant"));
      }
      absl::StrAppend(&text, *prefix, message.content, chat.separator);
    }
    text += chat.assistant;
  }
  std::vector<int32_t> ids;
  if (options.bos_token_id >= 0) ids.push_back(options.bos_token_id);
  const std::vector<int32_t> encoded = tokenizer_->Encode(text);
  ids.insert(ids.end(), encoded.begin(), encoded.end());
  return ids;
}

absl::Status GenerationModel::CheckCall(const GenerationCall& call, const std::vector<int32_t>& prompt,
                                        int& max_tokens) const {
  const GenerationOptions& options = *config_->generation;
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt is empty");
  const int64_t prompt_length = static_cast<int64_t>(prompt.size());
  if (prompt_length > options.max_prompt_length()) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt is ", prompt_length, " tokens; model ", config_->name,
                                                   " takes prompts of at most ", options.max_prompt_length(),
                                                   " tokens"));
  }
  const int64_t room = options.context_length - prompt_length;
  if (call.max_tokens) {
    if (*call.max_tokens < 1) {
      return absl::InvalidArgumentError(absl::StrCat("max_tokens must be at least 1 (got ", *call.max_tokens, ")"));
    }
    if (*call.max_tokens > room) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the prompt (", prompt_length, " tokens) plus max_tokens (", *call.max_tokens, ") exceeds model ",
          config_->name, "'s context of ", options.context_length, " tokens"));
    }
    max_tokens = *call.max_tokens;
  } else {
    if (room < 1) {
      return absl::InvalidArgumentError(absl::StrCat("the prompt (", prompt_length, " tokens) fills model ",
                                                     config_->name, "'s context of ", options.context_length,
                                                     " tokens"));
    }
    max_tokens = static_cast<int>(std::min<int64_t>(options.default_max_tokens, room));
  }
  if (call.stop.size() > kMaxStopStrings) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxStopStrings, " stop strings are allowed (got ", call.stop.size(), ")"));
  }
  for (const std::string& stop : call.stop) {
    if (stop.empty()) return absl::InvalidArgumentError("a stop string must not be empty");
  }
  return absl::OkStatus();
}

absl::StatusOr<GenerationHandle> GenerationModel::Generate(GenerationCall call,
                                                           std::shared_ptr<GenerationSink> sink) {
  absl::Status refused;
  if (!state_->ready()) {
    refused = absl::UnavailableError(state_->draining() ? "the server is draining; not accepting new requests"
                                                        : "the server is loading its models; not ready yet");
  }
  absl::StatusOr<std::vector<int32_t>> prompt = refused.ok() ? PromptIds(call) : refused;
  int max_tokens = 0;
  if (prompt.ok()) refused = CheckCall(call, *prompt, max_tokens);
  if (!prompt.ok()) refused = prompt.status();
  if (!refused.ok()) {
    if (metrics_ != nullptr) metrics_->RecordRefused(refused);
    return refused;
  }
  std::string echo_text;
  if (call.echo && call.prompt) echo_text = *call.prompt;
  const int prompt_tokens = static_cast<int>(prompt->size());
  auto state = std::make_shared<CallState>(tokenizer_.get(), std::move(sink), std::move(call.stop),
                                           std::move(echo_text), prompt_tokens, metrics_, clock_);
  GenerationRequest request;
  request.prompt = *std::move(prompt);
  request.max_tokens = max_tokens;
  request.sampling = call.sampling;
  request.ignore_eos = call.ignore_eos;
  request.deadline = call.deadline;
  request.on_token = [state](const GeneratedToken& token) { return state->OnToken(token); };
  request.on_done = [state](GenerationResult result) { state->OnDone(std::move(result)); };
  absl::StatusOr<SequenceId> id = engine_->Enqueue(std::move(request));
  if (!id.ok()) {
    if (metrics_ != nullptr) metrics_->RecordRefused(id.status());
    return id.status();
  }
  return GenerationHandle(engine_.get(), *id);
}

}  // namespace sluice
