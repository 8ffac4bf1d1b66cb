#include "loadtest/generation/generation_plan.h"

#include <algorithm>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "loadtest/core/workload.h"
#include "spdlog/spdlog.h"

namespace sluice::loadtest {

absl::StatusOr<std::vector<std::string>> ReadPromptFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the prompt file ", path));
  std::vector<std::string> prompts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    prompts.push_back(absl::StrReplaceAll(line, {{"\\n", "\n"}}));
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat("the prompt file ", path, " has no prompts"));
  return prompts;
}

absl::StatusOr<std::unique_ptr<GenerationPlan>> GenerationPlan::Create(const GenerationPlanOptions& options) {
  std::unique_ptr<GenerationPlan> plan(new GenerationPlan());
  plan->options_ = options;
  absl::StatusOr<std::unique_ptr<LengthProfile>> output =
      LengthProfile::Create(options.output_tokens, 0, options.max_output_tokens);
  if (!output.ok()) return absl::InvalidArgumentError(absl::StrCat("--output-tokens: ", output.status().message()));
  plan->output_ = *std::move(output);
  if (!options.prompts_file.empty()) {
    absl::StatusOr<std::vector<std::string>> prompts = ReadPromptFile(options.prompts_file);
    if (!prompts.ok()) return prompts.status();
    plan->prompts_ = *std::move(prompts);
  } else if (options.chat) {
    return absl::InvalidArgumentError("chat requests send text: give a prompt file");
  }
  if (options.shared_prefix_tokens > 0) {
    if (options.text_prompts || !plan->prompts_.empty()) {
      return absl::InvalidArgumentError(
          "--shared-prefix-tokens applies to token-id prompts only (--api openai without --prompts-file)");
    }
    for (int64_t i = 0; i < options.shared_prefix_tokens; ++i) {
      if (!options.corpus_ids.empty()) {
        plan->shared_prefix_.push_back(options.corpus_ids[static_cast<size_t>(i) % options.corpus_ids.size()]);
      } else {
        const uint64_t bound = static_cast<uint64_t>(std::max<int64_t>(2, options.synthetic_vocab)) - 1;
        plan->shared_prefix_.push_back(static_cast<int32_t>(1 + MixSeed(options.seed ^ 0x5a, i) % bound));
      }
    }
  }
  if (options.text_prompts && plan->prompts_.empty()) {
    if (options.counter == nullptr) {
      return absl::InvalidArgumentError(
          "text prompts of a given token count need the model's tokenizer: give --tokenizer PATH or "
          "--model-repository (with MODEL/tokenizer.model), or send --prompts-file");
    }
    int64_t sum = 0;
    for (absl::string_view word : absl::StrSplit(RealTextCorpus(), ' ', absl::SkipEmpty())) {
      Word& w = plan->words_.emplace_back();
      w.text = std::string(word);
      w.tokens = options.counter->Count(word);
      sum += w.tokens;
    }
    const int64_t whole = options.counter->Count(RealTextCorpus());
    if (sum != whole) {  // the counts stay exact (measured per prompt); only the drawn lengths are approximate
      spdlog::warn("the tokenizer does not split the prompt text at spaces ({} tokens in words, {} in the whole): "
                   "text prompts will be near, not at, the drawn lengths (their counts are measured)",
                   sum, whole);
    }
  }
  return plan;
}

std::string GenerationPlan::WordsOfLength(int64_t tokens, uint64_t start) const {
  std::string text;
  if (words_.empty()) return text;
  int skipped = 0;
  constexpr int kMaxSkipped = 4096;  // words in a row that overshoot before the count is given up on
  for (size_t i = static_cast<size_t>(start % words_.size()); tokens > 0 && skipped < kMaxSkipped;
       i = (i + 1) % words_.size()) {
    const Word& w = words_[i];
    if (w.tokens > tokens || w.tokens == 0) {
      ++skipped;
      continue;
    }
    skipped = 0;
    if (!text.empty()) text.push_back(' ');
    text += w.text;
    tokens -= w.tokens;
  }
  return text;
}

GenerationSpec GenerationPlan::Make(uint64_t index, const std::vector<int32_t>& synthetic_ids) const {
  GenerationSpec spec;
  spec.model = options_.model;
  std::mt19937_64 rng(MixSeed(options_.seed ^ 0x6e6a, index));
  spec.max_tokens = output_->Sample(rng);
  spec.ignore_eos = options_.ignore_eos;
  spec.temperature = options_.temperature;
  spec.chat = options_.chat;
  if (options_.per_request_seed) spec.seed = static_cast<int64_t>(MixSeed(options_.seed ^ 0x5eed, index) >> 1);
  const PromptTokenCounter* counter = options_.counter.get();
  if (!prompts_.empty()) {
    spec.prompt_text = prompts_[std::uniform_int_distribution<size_t>(0, prompts_.size() - 1)(rng)];
    if (counter != nullptr) spec.prompt_tokens = counter->added_tokens() + counter->Count(spec.prompt_text);
  } else if (options_.text_prompts) {
    const int64_t length = static_cast<int64_t>(synthetic_ids.size());
    spec.prompt_text = WordsOfLength(length - (counter != nullptr ? counter->added_tokens() : 0), rng());
    if (counter != nullptr) spec.prompt_tokens = counter->added_tokens() + counter->Count(spec.prompt_text);
  } else if (!options_.corpus_ids.empty()) {
    const std::vector<int32_t>& corpus = options_.corpus_ids;
    const size_t start = static_cast<size_t>(rng() % corpus.size());
    spec.prompt_ids.reserve(synthetic_ids.size());
    for (size_t i = 0; i < synthetic_ids.size(); ++i) spec.prompt_ids.push_back(corpus[(start + i) % corpus.size()]);
  } else {
    spec.prompt_ids = synthetic_ids;
  }
  if (!shared_prefix_.empty()) spec.prompt_ids.insert(spec.prompt_ids.begin(), shared_prefix_.begin(), shared_prefix_.end());
  // A prompt whose drawn output would overrun the context is refused by the server: ask for what fits instead.
  const int64_t prompt =
      !spec.prompt_ids.empty() ? static_cast<int64_t>(spec.prompt_ids.size()) : spec.prompt_tokens.value_or(0);
  if (options_.context_length > 0 && prompt > 0 && prompt + spec.max_tokens > options_.context_length) {
    spec.max_tokens = std::max<int64_t>(1, options_.context_length - prompt);
  }
  return spec;
}

std::string GenerationPlan::PromptSource() const {
  if (!prompts_.empty()) {
    return absl::StrCat("text prompts from ", options_.prompts_file, " (", prompts_.size(), ")",
                        options_.text_prompts && options_.counter == nullptr ? ", lengths unknown (no tokenizer)" : "");
  }
  if (options_.text_prompts) {
    return absl::StrCat("text of real-text words sized by the model's tokenizer to the drawn length (",
                        options_.counter != nullptr ? options_.counter->added_tokens() : 0,
                        " token added by the server included)");
  }
  const std::string shared =
      shared_prefix_.empty() ? "" : absl::StrCat(", each after the same ", shared_prefix_.size(), "-token prefix");
  if (!options_.corpus_ids.empty()) {
    return absl::StrCat("token-id arrays cut from real text tokenized by the model's tokenizer (",
                        options_.corpus_ids.size(), " ids)", shared);
  }
  return options_.synthetic_vocab > 0
             ? absl::StrCat("token-id arrays of seeded synthetic ids in [1, ", options_.synthetic_vocab, ")", shared)
             : absl::StrCat("token-id arrays of seeded synthetic ids in [1, --vocab)", shared);
}

const char* RealTextCorpus() {
  // Charles Darwin, On the Origin of Species (1859), chapter III and the closing paragraph; public domain.
  return "Before entering on the subject of this chapter, I must make a few preliminary remarks, to show how the "
         "struggle for existence bears on Natural Selection. It has been seen in the last chapter that amongst "
         "organic beings in a state of nature there is some individual variability: indeed I am not aware that this "
         "has ever been disputed. It is immaterial for us whether a multitude of doubtful forms be called species or "
         "sub-species or varieties; what rank, for instance, the two or three hundred doubtful forms of British "
         "plants are entitled to hold, if the existence of any well-marked varieties be admitted. But the mere "
         "existence of individual variability and of some few well-marked varieties, though necessary as the "
         "foundation for the work, helps us but little in understanding how species arise in nature. How have all "
         "those exquisite adaptations of one part of the organisation to another part, and to the conditions of "
         "life, and of one distinct organic being to another being, been perfected? We see these beautiful "
         "co-adaptations most plainly in the woodpecker and missletoe; and only a little less plainly in the "
         "humblest parasite which clings to the hairs of a quadruped or feathers of a bird; in the structure of the "
         "beetle which dives through the water; in the plumed seed which is wafted by the gentlest breeze; in "
         "short, we see beautiful adaptations everywhere and in every part of the organic world. "
         "It is interesting to contemplate an entangled bank, clothed with many plants of many kinds, with birds "
         "singing on the bushes, with various insects flitting about, and with worms crawling through the damp "
         "earth, and to reflect that these elaborately constructed forms, so different from each other, and "
         "dependent on each other in so complex a manner, have all been produced by laws acting around us. These "
         "laws, taken in the highest sense, being Growth with Reproduction; Inheritance which is almost implied by "
         "reproduction; Variability from the indirect and direct action of the external conditions of life, and "
         "from use and disuse; a Ratio of Increase so high as to lead to a Struggle for Life, and as a consequence "
         "to Natural Selection, entailing Divergence of Character and the Extinction of less-improved forms. Thus, "
         "from the war of nature, from famine and death, the most exalted object which we are capable of "
         "conceiving, namely, the production of the higher animals, directly follows. There is grandeur in this "
         "view of life, with its several powers, having been originally breathed into a few forms or into one; and "
         "that, whilst this planet has gone cycling on according to the fixed law of gravity, from so simple a "
         "beginning endless forms most beautiful and most wonderful have been, and are being, evolved.";
}

}  // namespace sluice::loadtest
