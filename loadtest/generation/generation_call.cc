#include "loadtest/generation/generation_call.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "loadtest/generation/generation_plan.h"

namespace sluice::loadtest {
namespace {

template <typename T>
std::optional<T> Get(const Call& call, const char* key) {
  const CallParameter* p = call.Parameter(key);
  if (p == nullptr) return std::nullopt;
  if (const T* value = std::get_if<T>(p)) return *value;
  return std::nullopt;
}

}  // namespace

Call GenerationSpecToCall(const GenerationSpec& spec) {
  Call call;
  call.model = spec.model;
  CallTensor& input = call.inputs.emplace_back();
  if (!spec.prompt_ids.empty()) {
    input.name = "prompt_ids";
    input.datatype = "INT32";
    input.shape = {1, static_cast<int64_t>(spec.prompt_ids.size())};
    input.raw.assign(reinterpret_cast<const char*>(spec.prompt_ids.data()), spec.prompt_ids.size() * sizeof(int32_t));
  } else {
    input.name = "text_input";
    input.datatype = "BYTES";
    input.shape = {1};
    input.raw = spec.prompt_text;
  }
  call.parameters = {{"max_tokens", spec.max_tokens}, {"ignore_eos", spec.ignore_eos}, {"chat", spec.chat}};
  if (spec.temperature) call.parameters.emplace_back("temperature", *spec.temperature);
  if (spec.seed) call.parameters.emplace_back("seed", *spec.seed);
  if (spec.prompt_tokens) call.parameters.emplace_back("prompt_tokens", *spec.prompt_tokens);
  return call;
}

absl::StatusOr<GenerationSpec> GenerationSpecFromCall(const Call& call) {
  if (call.inputs.size() != 1) return absl::InvalidArgumentError("a generation request carries one prompt input");
  GenerationSpec spec;
  spec.model = call.model;
  const std::string& raw = call.inputs[0].raw;
  const std::string& datatype = call.inputs[0].datatype;
  if (datatype == "INT32") {
    spec.prompt_ids.resize(raw.size() / sizeof(int32_t));
    std::memcpy(spec.prompt_ids.data(), raw.data(), spec.prompt_ids.size() * sizeof(int32_t));
  } else if (datatype == "INT64") {  // the workload's generic token ids
    std::vector<int64_t> ids(raw.size() / sizeof(int64_t));
    std::memcpy(ids.data(), raw.data(), ids.size() * sizeof(int64_t));
    spec.prompt_ids.assign(ids.begin(), ids.end());
  } else if (datatype == "BYTES") {
    spec.prompt_text = raw;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("a prompt of datatype ", datatype, " cannot be sent"));
  }
  if (spec.prompt_ids.empty() && spec.prompt_text.empty()) return absl::InvalidArgumentError("an empty prompt");
  spec.max_tokens = Get<int64_t>(call, "max_tokens").value_or(0);
  spec.ignore_eos = Get<bool>(call, "ignore_eos").value_or(false);
  spec.chat = Get<bool>(call, "chat").value_or(false);
  spec.temperature = Get<double>(call, "temperature");
  spec.seed = Get<int64_t>(call, "seed");
  spec.prompt_tokens = Get<int64_t>(call, "prompt_tokens");
  if (spec.chat && spec.prompt_text.empty()) return absl::InvalidArgumentError("chat needs a text prompt");
  return spec;
}

absl::StatusOr<GenerationSpec> GenerationSpecOfCall(const Call& call, const GenerationPlan* plan) {
  absl::StatusOr<GenerationSpec> spec = GenerationSpecFromCall(call);
  if (spec.ok() && plan != nullptr && call.from_workload()) return plan->Make(call.index, spec->prompt_ids);
  return spec;
}

Outcome GenerationOutcomeToOutcome(const GenerationOutcome& o, const StreamVerdict& verdict) {
  Outcome outcome = Outcome::Ended(verdict.code, verdict.message);
  outcome.generation = GeneratedText{o.chunk_times_s, o.text, o.prompt_tokens.value_or(0),
                                     o.completion_tokens.value_or(0), o.finish_reason};
  return outcome;
}

GenerationOutcome GenerationOutcomeOf(const Outcome& outcome) {
  GenerationOutcome o;
  if (!outcome.generation) return o;
  const GeneratedText& g = *outcome.generation;
  o.chunk_times_s = g.chunk_times_s;
  o.text = g.text;
  o.prompt_tokens = g.prompt_tokens;
  o.completion_tokens = g.completion_tokens;
  o.finish_reason = g.finish_reason;
  o.done = true;
  return o;
}

int FirstMismatchedToken(const std::vector<std::string>& pieces, absl::string_view served) {
  size_t at = 0;
  for (size_t k = 0; k < pieces.size(); ++k) {
    if (served.substr(at, pieces[k].size()) != pieces[k]) return static_cast<int>(k);
    at += pieces[k].size();
  }
  return at == served.size() ? -1 : static_cast<int>(pieces.size());
}

}  // namespace sluice::loadtest
