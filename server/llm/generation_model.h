// One served text-generation model: its tokenizer, its ContinuousBatcher, its metrics, and the one entry point
// every generation front end calls (OpenAI completions/chat over HTTP, Triton's ModelStreamInfer over gRPC):
// GenerationModel::Generate — draining check, prompt building (chat template), tokenizing, limits and parameter
// validation, stop strings, incremental detokenizing, accounting, exactly-once completion. Front ends only decode
// their wire format into a GenerationCall and encode the deltas and the summary.
//
// Thread-safety: Generate() and the accessors are safe from any thread; the object is immutable after Create.
// Sink callbacks run on an engine thread (OnDone also on a Cancel() caller's thread) with no lock of ours held,
// one at a time per call, OnDelta calls in order, OnDone last and exactly once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"
#include "backend/generation_backend.h"
#include "scheduler/clock.h"
#include "scheduler/continuous_batcher.h"
#include "scheduler/generation_request.h"
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
  std::optional<std::vector<ChatMessage>> messages;  // chat: rendered with the model's chat template (BOS added)
  std::optional<int> max_tokens;                   // absent: the model's default_max_tokens, cut to the context
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

// Withdraws an accepted call (client gone): its slot is freed and OnDone is called (CANCELLED). Empty when the
// call was refused. Safe to call more than once and after the call finished.
class GenerationHandle {
 public:
  GenerationHandle() = default;
  GenerationHandle(ContinuousBatcher* batcher, SequenceId id) : batcher_(batcher), id_(id) {}
  void Cancel() const {
    if (batcher_ != nullptr) batcher_->Cancel(id_);
  }
  bool accepted() const { return batcher_ != nullptr; }

 private:
  ContinuousBatcher* batcher_ = nullptr;
  SequenceId id_ = 0;
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
  // Loads the tokenizer (checking its vocabulary fits the model's) and starts the engine.
  static absl::StatusOr<std::unique_ptr<GenerationModel>> Create(const GenerationModelOptions& options);
  GenerationModel(const GenerationModel&) = delete;
  GenerationModel& operator=(const GenerationModel&) = delete;
  ~GenerationModel();

  // The one request path. OK: accepted, the sink gets its deltas and exactly one OnDone. An error: refused now
  // (counted here), the sink is never called: Unavailable (draining or not ready), InvalidArgument (no or two
  // inputs, empty prompt, prompt over the largest prompt bucket, prompt + max_tokens over the context, bad
  // sampling values, too many stop strings, token ids out of range), ResourceExhausted (waiting queue full).
  absl::StatusOr<GenerationHandle> Generate(GenerationCall call, std::shared_ptr<GenerationSink> sink);

  const ModelConfig& config() const { return *config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  ContinuousBatcher& engine() { return *engine_; }
  // Serving: the server is ready and not draining.
  bool ready() const;
  // Stops admitting and finishes every accepted sequence (drain).
  void Stop();

 private:
  GenerationModel() = default;
  // The call's prompt as token ids (chat template applied, BOS added to text), or why it has none.
  absl::StatusOr<std::vector<int32_t>> PromptIds(const GenerationCall& call) const;
  // Limits the engine would also refuse, checked here to name them in the caller's terms; sets max_tokens (the
  // call's, or the default cut to the context).
  absl::Status CheckCall(const GenerationCall& call, const std::vector<int32_t>& prompt, int& max_tokens) const;

  const ModelConfig* config_ = nullptr;
  const ServingState* state_ = nullptr;
  Clock* clock_ = nullptr;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<ContinuousBatcher> engine_;
  std::unique_ptr<GenerationMetrics> owned_metrics_;
  GenerationMetrics* metrics_ = nullptr;  // owned_metrics_, or null without metrics
};

}  // namespace sluice
