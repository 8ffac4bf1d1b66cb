#include "loadtest/generation/generation_app.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include <rapidjson/document.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backend/base/model_config.h"
#include "loadtest/generation/generation_load.h"
#include "loadtest/generation/openai_client.h"
#include "server/llm/tokenizer.h"

namespace sluice::loadtest {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(path);
  if (!tokenizer.ok()) return absl::InvalidArgumentError(tokenizer.status().message());
  return tokenizer;
}

// The tokenizer to use: `tokenizer_path`, else the repository's <model>/tokenizer.model when it exists, else "".
std::string TokenizerPath(const std::string& tokenizer_path, const std::string& model_repository,
                          const std::string& model) {
  if (!tokenizer_path.empty() || model_repository.empty()) return tokenizer_path;
  const fs::path candidate = fs::path(model_repository) / model / "tokenizer.model";
  return fs::exists(candidate) ? candidate.string() : "";
}

// The BOS id the server puts before a text prompt (-1: none), from the model's config.yaml; nullopt without one.
std::optional<int> ConfiguredBos(const std::string& model_repository, const std::string& model) {
  if (model_repository.empty()) return std::nullopt;
  absl::StatusOr<ModelConfig> config = LoadModelConfig((fs::path(model_repository) / model).string());
  if (!config.ok() || !config->generation) return std::nullopt;
  return config->generation->bos_token_id;
}

class TokenizerCounter final : public PromptTokenCounter {
 public:
  TokenizerCounter(std::unique_ptr<Tokenizer> tokenizer, int64_t added)
      : tokenizer_(std::move(tokenizer)), added_(added) {}
  int64_t Count(absl::string_view text) const override {
    return static_cast<int64_t>(tokenizer_->Encode(std::string_view(text.data(), text.size())).size());
  }
  int64_t added_tokens() const override { return added_; }

 private:
  const std::unique_ptr<Tokenizer> tokenizer_;
  const int64_t added_;
};

// The text a reference case is sent as over ModelStreamInfer: its "prompt" when it has one, else its prompt ids
// (without the BOS) decoded; InvalidArgument unless the server makes exactly `prompt_ids` of it (BOS + tokenizer).
absl::StatusOr<std::string> ReferencePromptText(const rapidjson::Value& c, const std::vector<int32_t>& prompt_ids,
                                                const Tokenizer& tokenizer, std::optional<int> configured_bos) {
  const int bos = configured_bos.value_or(prompt_ids.front());  // no config: the case's first id is taken as BOS
  const size_t skip = bos >= 0 && prompt_ids.front() == bos ? 1 : 0;
  std::string text;
  if (c.HasMember("prompt") && c["prompt"].IsString()) {
    text.assign(c["prompt"].GetString(), c["prompt"].GetStringLength());
  } else {
    text = tokenizer.Decode(std::vector<int32_t>(prompt_ids.begin() + static_cast<std::ptrdiff_t>(skip),
                                                 prompt_ids.end()));
  }
  std::vector<int32_t> made;
  if (bos >= 0) made.push_back(bos);
  const std::vector<int32_t> encoded = tokenizer.Encode(text);
  made.insert(made.end(), encoded.begin(), encoded.end());
  if (made != prompt_ids) {
    return absl::InvalidArgumentError(absl::StrCat(
        "its prompt_ids (", prompt_ids.size(), ") are not what the server makes of its prompt text (", made.size(),
        " ids: BOS + the tokenizer), and ModelStreamInfer sends text"));
  }
  return text;
}

std::vector<int32_t> IntArray(const rapidjson::Value& v) {
  std::vector<int32_t> out;
  if (!v.IsArray()) return out;
  for (const auto& x : v.GetArray()) out.push_back(x.IsInt() ? x.GetInt() : -1);
  return out;
}

}  // namespace

absl::StatusOr<ModelInfo> GenerationModelInfo(Api api, const ClientOptions& client,
                                              const std::string& model, int64_t max_prompt) {
  ModelInfo info;
  info.name = model;
  info.kind = "generation";
  info.input_name = "prompt_ids";
  info.datatype = "INT32";
  int64_t served_max_prompt = 0;
  if (api == Api::kOpenAi) {
    absl::StatusOr<OpenAiModelEntry> served = DescribeOpenAiModel(client.address, client.bearer_token, model);
    if (!served.ok()) return served.status();
    info.vocab_size = served->vocab_size;
    info.context_length = served->max_model_len;
    served_max_prompt = served->max_prompt_tokens;
  }
  info.max_length = max_prompt > 0 ? max_prompt : served_max_prompt > 0 ? served_max_prompt : 1024;
  info.output_names = {"text_output"};
  return info;
}

absl::StatusOr<std::vector<int32_t>> RealTextIds(const std::string& tokenizer_path,
                                                 const std::string& model_repository, const std::string& model) {
  const std::string path = TokenizerPath(tokenizer_path, model_repository, model);
  if (path.empty()) return std::vector<int32_t>();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(path);
  if (!tokenizer.ok()) return tokenizer.status();
  std::vector<int32_t> ids = (*tokenizer)->Encode(RealTextCorpus());
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat("tokenizer ", path, " encodes the corpus to nothing"));
  return ids;
}

absl::StatusOr<std::shared_ptr<const PromptTokenCounter>> LoadPromptTokenCounter(const std::string& tokenizer_path,
                                                                                 const std::string& model_repository,
                                                                                 const std::string& model) {
  const std::string path = TokenizerPath(tokenizer_path, model_repository, model);
  if (path.empty()) return std::shared_ptr<const PromptTokenCounter>();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(path);
  if (!tokenizer.ok()) return tokenizer.status();
  const int64_t added = ConfiguredBos(model_repository, model).value_or(1) >= 0 ? 1 : 0;
  return std::make_shared<const TokenizerCounter>(*std::move(tokenizer), added);
}

namespace {

// One case of a generation reference set: the prompt, the greedy output and the reference's top-2 logit margin
// at each output token.
struct ReferenceCase {
  int index = 0;  // in the file, counting the cases skipped as incomplete
  rapidjson::Value const* json = nullptr;  // the case itself (for its prompt text)
  std::vector<int32_t> prompt, output;
  std::vector<double> margins;
};

// reference_generation.json's cases that have a prompt and an output. REQUIRES: `doc` outlives the cases.
absl::StatusOr<std::vector<ReferenceCase>> ReadReferenceCases(const fs::path& path, rapidjson::Document& doc) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("no reference set ", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  doc.Parse(text.str().c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("cases") || !doc["cases"].IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(path.string(), " is not a generation reference set"));
  }
  std::vector<ReferenceCase> cases;
  int index = 0;
  for (const auto& c : doc["cases"].GetArray()) {
    ReferenceCase one;
    one.index = index++;
    if (!c.IsObject() || !c.HasMember("prompt_ids") || !c.HasMember("output_ids")) continue;
    one.json = &c;
    one.prompt = IntArray(c["prompt_ids"]);
    one.output = IntArray(c["output_ids"]);
    if (c.HasMember("top2_margins") && c["top2_margins"].IsArray()) {
      for (const auto& m : c["top2_margins"].GetArray()) one.margins.push_back(m.IsNumber() ? m.GetDouble() : 0);
    }
    if (!one.prompt.empty() && !one.output.empty()) cases.push_back(std::move(one));
  }
  return cases;
}

// What every case of one VerifyGeneration shares.
struct CaseContext {
  std::string model;
  InferClient* client = nullptr;
  const Tokenizer* tokenizer = nullptr;
  std::optional<int> bos;
  bool text_only = false;  // triton-stream: the prompt goes as text, and there is no usage to check
  double timeout_ms = 0;
};

// The greedy request of `c`, its prompt as ids or (text_only) as the text that tokenizes to them.
absl::StatusOr<Call> CaseRequest(const ReferenceCase& c, const CaseContext& ctx) {
  GenerationSpec spec;
  spec.model = ctx.model;
  spec.prompt_ids = c.prompt;
  spec.prompt_tokens = static_cast<int64_t>(c.prompt.size());
  spec.max_tokens = static_cast<int64_t>(c.output.size());
  spec.ignore_eos = true;
  spec.temperature = 0.0;
  if (ctx.text_only) {
    absl::StatusOr<std::string> text = ReferencePromptText(*c.json, c.prompt, *ctx.tokenizer, ctx.bos);
    if (!text.ok()) return text.status();
    spec.prompt_ids.clear();
    spec.prompt_text = *std::move(text);
  }
  Call call = GenerationSpecToCall(spec);
  call.id = absl::StrCat("verify-", c.index);
  return call;
}

// Sends case `c` and compares the answer token for token; counts it into `report`.
void VerifyCase(const ReferenceCase& c, const CaseContext& ctx, VerifyReport& report) {
  ++report.cases;
  auto fail = [&](std::string what) {
    ++report.mismatched_cases;
    if (report.failures.size() < 8) report.failures.push_back(absl::StrCat("case ", c.index, ": ", what));
  };
  absl::StatusOr<Call> call = CaseRequest(c, ctx);
  if (!call.ok()) return fail(std::string(call.status().message()));
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::microseconds(static_cast<int64_t>(ctx.timeout_ms * 1e3));
  const Outcome answer = ctx.client->SendAndWait(*std::move(call), deadline);
  if (!answer.ok()) {
    ++report.failed_calls;
    return fail(absl::StrCat(GrpcCodeName(answer.code), ": ", answer.message));
  }
  const GenerationOutcome outcome = GenerationOutcomeOf(answer);
  IncrementalDetokenizer detokenizer(ctx.tokenizer);
  std::vector<std::string> pieces;
  for (int32_t id : c.output) pieces.push_back(detokenizer.Add(id));
  pieces.back() += detokenizer.Flush();
  const int first = FirstMismatchedToken(pieces, outcome.text);
  const int64_t expected = static_cast<int64_t>(c.output.size());
  if (first >= 0) {
    report.mismatched_elements += expected - std::min<int64_t>(first, expected);
    const std::string margin = first < static_cast<int>(c.margins.size())
                                   ? absl::StrFormat(" (reference top-2 logit margin there %.3g)", c.margins[first])
                                   : "";
    fail(absl::StrCat("first mismatch at output token ", first, " of ", c.output.size(), margin));
  } else if (!ctx.text_only && outcome.completion_tokens.value_or(-1) != expected) {
    fail(absl::StrCat("text matches but usage.completion_tokens is ", outcome.completion_tokens.value_or(-1),
                      ", not ", c.output.size()));
  }
}

}  // namespace

absl::StatusOr<VerifyReport> VerifyGeneration(Api api, const ClientOptions& client_options,
                                              const std::string& model, const std::string& model_repository,
                                              double timeout_ms) {
  const fs::path dir = fs::path(model_repository) / model;
  const fs::path reference_path = dir / "reference_generation.json";
  rapidjson::Document doc;
  absl::StatusOr<std::vector<ReferenceCase>> cases = ReadReferenceCases(reference_path, doc);
  if (!cases.ok()) return cases.status();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer((dir / "tokenizer.model").string());
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::unique_ptr<InferClient>> client = CreateGenerationClient(api, client_options, nullptr);
  if (!client.ok()) return client.status();

  CaseContext ctx;
  ctx.model = model;
  ctx.client = client->get();
  ctx.tokenizer = tokenizer->get();
  ctx.bos = ConfiguredBos(model_repository, model);
  ctx.text_only = api == Api::kTritonStream;
  ctx.timeout_ms = timeout_ms;
  VerifyReport report;
  report.model = model;
  report.tolerance = 0;
  report.generation = true;
  for (const ReferenceCase& c : *cases) VerifyCase(c, ctx, report);
  if (report.cases == 0) return absl::InvalidArgumentError(absl::StrCat(reference_path.string(), " has no cases"));
  return report;
}

}  // namespace sluice::loadtest
