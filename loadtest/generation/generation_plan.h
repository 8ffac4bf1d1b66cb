// What generation request i of a run asks for — its prompt and its max_tokens — as a pure function of (seed, i),
// like the tensor workload (workload.h). Prompt lengths are drawn by the workload's length profile (the runner
// records them); this plan turns a drawn length into token ids: a window of that many ids of real text (a corpus
// the caller tokenized with the model's own tokenizer), or, without one, the workload's seeded synthetic ids.
// Or prompts come from a file (one text prompt per line), sent as text. APIs that take text only (--api
// triton-stream) get text prompts instead of ids: words of the same real text, cut at spaces and sized with the
// model's tokenizer (a PromptTokenCounter) so that the server's count of the prompt (its BOS included) is the
// drawn length; the count is measured for every prompt and travels with it (GenerationSpec::prompt_tokens).
// Output lengths come from their own profile (fixed, uniform, lognormal, file) and are sent as max_tokens, with
// ignore_eos so that every request generates exactly that many tokens (comparable runs).
// Thread-safety: immutable after Create(); Make() may be called from any number of threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loadtest/core/length_profile.h"
#include "loadtest/generation/generation_call.h"

namespace sluice::loadtest {

// How the server counts a text prompt: the model's tokenizer, plus the tokens it adds to every text prompt (BOS).
// Implemented over the model's SentencePiece model in the app layer (generation_app.h), so that this library needs
// no tokenizer.
// Thread-safety: Count() may be called from any number of threads.
class PromptTokenCounter {
 public:
  virtual ~PromptTokenCounter() = default;
  // Tokens of `text` alone (nothing added).
  virtual int64_t Count(absl::string_view text) const = 0;
  // Tokens the server adds to a text prompt (1 for a BOS, else 0).
  virtual int64_t added_tokens() const = 0;
};

struct GenerationPlanOptions {
  std::string model;
  std::string output_tokens = "fixed:128";  // LengthProfile spec of max_tokens
  int64_t max_output_tokens = 4096;         // draws are clipped to this
  std::string prompts_file;                 // text prompts, one per line ('\n' in a prompt written as \n)
  std::vector<int32_t> corpus_ids;          // real text as token ids; empty: keep the drawn synthetic ids
  int64_t synthetic_vocab = 0;              // the synthetic ids' bound [1, it), for the report
  int64_t context_length = 0;               // > 0: max_tokens is cut so that prompt + max_tokens fits in it
  bool ignore_eos = true;
  std::optional<double> temperature;
  // > 0: every token-id prompt starts with the same this many ids (a shared system prompt; real text from the
  // corpus's start, else seeded synthetic ids), followed by the drawn prompt. Prefix caching's workload.
  int64_t shared_prefix_tokens = 0;
  bool per_request_seed = false;  // send seed = a hash of (seed, i) (sampled runs repeatable request by request)
  bool chat = false;              // /v1/chat/completions (text prompts from a file only)
  uint64_t seed = 1;
  // Text prompts only (--api triton-stream): real-text words sized by `counter` to the drawn length, or the prompt
  // file's lines (their counts known with `counter`). Without `counter` only a prompt file will do.
  bool text_prompts = false;
  std::shared_ptr<const PromptTokenCounter> counter;
};

class GenerationPlan {
 public:
  static absl::StatusOr<std::unique_ptr<GenerationPlan>> Create(const GenerationPlanOptions& options);

  // Request `index` whose drawn prompt is `synthetic_ids` (its length is the drawn prompt length).
  GenerationSpec Make(uint64_t index, const std::vector<int32_t>& synthetic_ids) const;
  // How prompts are made, for the report.
  std::string PromptSource() const;
  size_t prompt_count() const { return prompts_.size(); }

  GenerationPlan(const GenerationPlan&) = delete;
  GenerationPlan& operator=(const GenerationPlan&) = delete;

 private:
  struct Word {
    std::string text;
    int64_t tokens = 0;  // counted alone
  };

  GenerationPlan() = default;
  // Real-text words from a seeded start whose token counts add up to `tokens` (words that would overshoot are
  // skipped; the corpus wraps around).
  std::string WordsOfLength(int64_t tokens, uint64_t start) const;

  GenerationPlanOptions options_;
  std::unique_ptr<LengthProfile> output_;
  std::vector<std::string> prompts_;
  std::vector<int32_t> shared_prefix_;  // shared_prefix_tokens ids, put before every token-id prompt
  std::vector<Word> words_;  // text_prompts with a counter: the corpus split at spaces
};

// Reads a prompt file: one prompt per line, blank lines skipped, the two characters \n read as a line break.
absl::StatusOr<std::vector<std::string>> ReadPromptFile(const std::string& path);

// A few paragraphs of public-domain English prose (for real-text prompts: tokenize it with the model's tokenizer).
const char* RealTextCorpus();

}  // namespace sluice::loadtest
