// One served text-generation model: its tokenizer, its ContinuousBatcher, its metrics, and the one entry point
// every generation front end calls (OpenAI completions/chat over HTTP, Triton's ModelStreamInfer over gRPC):
// GenerationModel::Generate — draining check, size limits, prompt building (chat template), tokenizing, limits and
// parameter validation, stop strings, incremental detokenizing, accounting, exactly-once completion. Front ends
// only decode their wire format into a GenerationCall and encode the deltas and the summary.
//
// Bounded work before limits: Generate itself does only what is independent of the input's size (readiness, byte
// and count limits) on the caller's thread, which is an I/O thread (HTTP event loop, gRPC callback). The chat
// template, tokenizing and the limits on token ids run on the prep arena (prep_queue.h), at most
// generation.max_queue_size calls per model at once; the rest are refused (ResourceExhausted).
//
// Thread-safety: Generate() and the accessors are safe from any thread; the object is immutable after Create.
// Sink callbacks run with no lock of ours held, one at a time per call, OnDelta calls in order, OnDone last and
// exactly once: on Generate's caller thread for a refusal made there, on a prep-arena thread for one made while
// preparing, otherwise on an engine thread (or a Cancel() caller's thread).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backend/base/model_config.h"
#include "backend/base/status_mapping.h"
#include "backend/generation_backend.h"
#include "scheduler/clock.h"
#include "scheduler/continuous_batcher.h"
#include "scheduler/generation_request.h"
#include "backend/base/sync.h"
#include "server/llm/hf_tokenizers/hf_tokenizer.h"
#include "server/llm/hf_tokenizers/jinja_chat_template.h"
#include "server/llm/prep_queue.h"
#include "server/llm/tokenizer.h"

namespace sluice {

class ServingState;
class ServerMetrics;
class GenerationMetrics;

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

// What a front end decoded. Exactly one of prompt / prompt_ids / messages is the input.
struct GenerationCall {
  std::optional<std::string> prompt;               // plain text (BOS added)
  std::optional<std::vector<int32_t>> prompt_ids;  // token ids as given (no BOS added)
  // chat: rendered with the checkpoint's Jinja template (tokenizer_config.json beside a tokenizer.json; BOS only
  // where the template puts it) or else the config's simple chat_template (BOS added)
  std::optional<std::vector<ChatMessage>> messages;
  std::optional<int64_t> max_tokens;               // absent: the model's default_max_tokens, cut to the context
  SamplingParams sampling;
  std::vector<std::string> stop;                   // stop strings (not included in the output), at most 4
  bool ignore_eos = false;
  bool echo = false;                               // completions: the prompt text is the first delta
  absl::Time deadline = absl::InfiniteFuture();
};

// A piece of output as it is produced. `text` is always whole UTF-8 characters; text held back (a possible stop
// string prefix, an incomplete character) comes in a later delta or the last one.
struct GenerationDelta {
  std::string text;
  std::vector<int32_t> token_ids;  // the tokens this delta completes (may be empty when only held text is flushed)
};

struct GenerationSummary {
  absl::Status status;        // OK for finish length/stop
  FinishReason finish = FinishReason::kStop;
  int prompt_tokens = 0;
  int completion_tokens = 0;
};

// Where a call's output goes. Held by the call until OnDone.
class GenerationSink {
 public:
  virtual ~GenerationSink() = default;
  // Return false when the client is gone: the sequence then finishes (kCancelled) and frees its slot.
  virtual bool OnDelta(const GenerationDelta& delta) = 0;
  virtual void OnDone(const GenerationSummary& summary) = 0;
};

// WithRequestField / RequestField (the field a refusal is about): backend/base/status_mapping.h.

// One call between Generate and its end: still being prepared, or a sequence of the engine. Shared by the handle
// and the preparing job. Thread-safety: every method is safe from any thread.
class GenerationTicket {
 public:
  // The client is gone: a call still being prepared is answered CANCELLED by its job; an enqueued one is cancelled
  // in the engine now.
  void Cancel();
  bool cancelled();
  // The job enqueued the call as `id`. Returns whether Cancel() came first (the caller then cancels `id`).
  bool Enqueued(ContinuousBatcher* batcher, SequenceId id);

 private:
  Mutex mu_;
  ContinuousBatcher* batcher_ ABSL_GUARDED_BY(mu_) = nullptr;
  SequenceId id_ ABSL_GUARDED_BY(mu_) = 0;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

// Withdraws a call (client gone): its slot is freed and OnDone is called (CANCELLED), if it has not been already.
// Empty when the call was refused by Generate. Safe to call more than once and after the call finished.
class GenerationHandle {
 public:
  GenerationHandle() = default;
  explicit GenerationHandle(std::shared_ptr<GenerationTicket> ticket) : ticket_(std::move(ticket)) {}
  void Cancel() const {
    if (ticket_ != nullptr) ticket_->Cancel();
  }
  bool accepted() const { return ticket_ != nullptr; }

 private:
  std::shared_ptr<GenerationTicket> ticket_;
};

struct GenerationModelOptions {
  const ModelConfig* config = nullptr;            // kind generation; must outlive the model
  std::vector<GenerationBackend*> instances;      // not owned; must outlive the model
  const ServingState* state = nullptr;            // must outlive the model
  ServerMetrics* metrics = nullptr;               // optional
  Clock* clock = &Clock::Real();
};

class GenerationModel {
 public:
  // Loads the tokenizer (checking its vocabulary fits the model's) and, for a tokenizer.json, the Jinja chat
  // template of a tokenizer_config.json beside it (a broken template fails the load, naming it), then starts the
  // engine.
  static absl::StatusOr<std::unique_ptr<GenerationModel>> Create(const GenerationModelOptions& options);
  GenerationModel(const GenerationModel&) = delete;
  GenerationModel& operator=(const GenerationModel&) = delete;
  ~GenerationModel();

  // The one request path, with ServedModel::Infer's contract: `call` is what the front end decoded, or why its
  // wire message could not be decoded; `sink` gets its deltas and OnDone exactly once, refusals included, each
  // counted once in the metrics here. Refusals: the decode error as given; Unavailable (draining or not ready);
  // InvalidArgument (no or two inputs, a prompt over max_prompt_bytes() or, tokenized, over the largest prompt
  // bucket, prompt + max_tokens over the context, bad sampling values, too many stop strings, token ids out of
  // range); ResourceExhausted (too many calls being prepared, waiting queue full). The handle is empty when the
  // call was refused on this thread.
  GenerationHandle Generate(absl::StatusOr<GenerationCall> call, std::shared_ptr<GenerationSink> sink);

  // The longest prompt text (bytes, chat template included) that could still fit the largest prompt bucket; a
  // longer one is refused before any tokenizing (see the derivation in Create).
  int64_t max_prompt_bytes() const { return max_prompt_bytes_; }
  const ModelConfig& config() const { return *config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  ContinuousBatcher& engine() { return *engine_; }
  // Serving: the server is ready and not draining.
  bool ready() const;
  // Stops admitting and finishes every accepted sequence (drain).
  void Stop();

 private:
  GenerationModel() = default;
  // The Jinja chat template for a tokenizer.json model (hf_tokenizer_ and jinja_template_), if it has one.
  absl::Status LoadJinjaTemplate(const ModelConfig& config);
  // Refuses the call (counted) through its sink.
  void Refuse(const absl::Status& status, GenerationSink& sink);
  // Checks that take no time proportional to the input: inputs present, text bytes, id count, stop strings.
  absl::Status CheckSizes(const GenerationCall& call) const;
  // The prep-arena half of Generate: prompt ids, limits, enqueue (or the refusal through the sink).
  void Prepare(GenerationCall& call, const std::shared_ptr<GenerationSink>& sink, GenerationTicket& ticket);
  // The call's prompt as token ids (chat template applied, BOS added to text), or why it has none.
  absl::StatusOr<std::vector<int32_t>> PromptIds(const GenerationCall& call) const;
  // Chat through the checkpoint's Jinja template: rendered, then tokenized with special tokens recognized (as
  // transformers' apply_chat_template(tokenize=True)); a message whose content holds a special token's text is
  // refused, so special tokens come only from the template.
  absl::StatusOr<std::vector<int32_t>> JinjaPromptIds(const std::vector<ChatMessage>& messages) const;
  // Limits the engine would also refuse, checked here to name them in the caller's terms; sets max_tokens (the
  // call's, or the default cut to the context).
  absl::Status CheckCall(const GenerationCall& call, const std::vector<int32_t>& prompt, int& max_tokens) const;

  const ModelConfig* config_ = nullptr;
  const ServingState* state_ = nullptr;
  Clock* clock_ = nullptr;
  std::unique_ptr<Tokenizer> tokenizer_;
  const HfTokenizer* hf_tokenizer_ = nullptr;            // tokenizer_ when it is a tokenizer.json
  std::unique_ptr<JinjaChatTemplate> jinja_template_;  // null: the config's simple chat_template
  std::unique_ptr<ContinuousBatcher> engine_;
  int64_t max_prompt_bytes_ = 0;
  std::unique_ptr<PrepQueue> prep_;  // destroyed first: waits for the jobs that use the rest
  std::unique_ptr<GenerationMetrics> owned_metrics_;
  GenerationMetrics* metrics_ = nullptr;  // owned_metrics_, or null without metrics
};

}  // namespace sluice
