#include "loadtest/generation_app.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <rapidjson/document.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loadtest/openai_client.h"
#include "loadtest/openai_stream.h"
#include "server/llm/tokenizer.h"

namespace sluice::loadtest {
namespace {

namespace fs = std::filesystem;

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::Load(path);
  if (!tokenizer.ok()) return absl::InvalidArgumentError(tokenizer.status().message());
  return tokenizer;
}

std::vector<int32_t> IntArray(const rapidjson::Value& v) {
  std::vector<int32_t> out;
  if (!v.IsArray()) return out;
  for (const auto& x : v.GetArray()) out.push_back(x.IsInt() ? x.GetInt() : -1);
  return out;
}

}  // namespace

absl::StatusOr<ModelInfo> GenerationModelInfo(const std::string& model, int64_t max_prompt) {
  ModelInfo info;
  info.name = model;
  info.kind = "generation";
  info.input_name = "prompt_ids";
  info.datatype = "INT32";
  info.max_length = max_prompt > 0 ? max_prompt : 1024;
  info.output_names = {"text_output"};
  return info;
}

absl::StatusOr<std::vector<int32_t>> RealTextIds(const std::string& tokenizer_path,
                                                 const std::string& model_repository, const std::string& model) {
  std::string path = tokenizer_path;
  if (path.empty() && !model_repository.empty()) {
    const fs::path candidate = fs::path(model_repository) / model / "tokenizer.model";
    if (fs::exists(candidate)) path = candidate.string();
  }
  if (path.empty()) return std::vector<int32_t>();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(path);
  if (!tokenizer.ok()) return tokenizer.status();
  std::vector<int32_t> ids = (*tokenizer)->Encode(RealTextCorpus());
  if (ids.empty()) return absl::InvalidArgumentError(absl::StrCat("tokenizer ", path, " encodes the corpus to nothing"));
  return ids;
}

absl::StatusOr<VerifyReport> VerifyGeneration(const InferClient::Options& client_options, const std::string& model,
                                              const std::string& model_repository, double timeout_ms) {
  const fs::path dir = fs::path(model_repository) / model;
  const fs::path reference_path = dir / "reference_generation.json";
  std::ifstream in(reference_path);
  if (!in) return absl::NotFoundError(absl::StrCat("no reference set ", reference_path.string()));
  std::stringstream text;
  text << in.rdbuf();
  rapidjson::Document doc;
  doc.Parse(text.str().c_str());
  if (doc.HasParseError() || !doc.IsObject() || !doc.HasMember("cases") || !doc["cases"].IsArray()) {
    return absl::InvalidArgumentError(absl::StrCat(reference_path.string(), " is not a generation reference set"));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer((dir / "tokenizer.model").string());
  if (!tokenizer.ok()) return tokenizer.status();

  OpenAiInferClient client(client_options, nullptr);
  VerifyReport report;
  report.model = model;
  report.tolerance = 0;
  report.generation = true;
  int index = 0;
  for (const auto& c : doc["cases"].GetArray()) {
    const int case_index = index++;
    if (!c.IsObject() || !c.HasMember("prompt_ids") || !c.HasMember("output_ids")) continue;
    const std::vector<int32_t> prompt = IntArray(c["prompt_ids"]);
    const std::vector<int32_t> output = IntArray(c["output_ids"]);
    std::vector<double> margins;
    if (c.HasMember("top2_margins") && c["top2_margins"].IsArray()) {
      for (const auto& m : c["top2_margins"].GetArray()) margins.push_back(m.IsNumber() ? m.GetDouble() : 0);
    }
    if (prompt.empty() || output.empty()) continue;
    ++report.cases;
    GenerationSpec spec;
    spec.model = model;
    spec.prompt_ids = prompt;
    spec.max_tokens = static_cast<int64_t>(output.size());
    spec.ignore_eos = true;
    spec.temperature = 0.0;
    inference::ModelInferRequest request;
    GenerationSpecToProto(spec, request);
    request.set_id(absl::StrCat("verify-", case_index));
    inference::ModelInferResponse response;
    const auto deadline =
        std::chrono::system_clock::now() + std::chrono::microseconds(static_cast<int64_t>(timeout_ms * 1e3));
    const grpc::Status status = client.Infer(std::move(request), deadline, &response);
    auto fail = [&](std::string what) {
      ++report.mismatched_cases;
      if (report.failures.size() < 8) report.failures.push_back(absl::StrCat("case ", case_index, ": ", what));
    };
    if (!status.ok()) {
      ++report.failed_calls;
      fail(absl::StrCat(GrpcCodeName(status.error_code()), ": ", status.error_message()));
      continue;
    }
    const OpenAiStreamOutcome outcome = OutcomeFromResponse(response);
    IncrementalDetokenizer detokenizer(tokenizer->get());
    std::vector<std::string> pieces;
    for (int32_t id : output) pieces.push_back(detokenizer.Add(id));
    pieces.back() += detokenizer.Flush();
    const int first = FirstMismatchedToken(pieces, outcome.text);
    if (first >= 0) {
      report.mismatched_elements += static_cast<int64_t>(output.size()) - std::min<int64_t>(first, output.size());
      const std::string margin = first < static_cast<int>(margins.size())
                                     ? absl::StrFormat(" (reference top-2 logit margin there %.3g)", margins[first])
                                     : "";
      fail(absl::StrCat("first mismatch at output token ", first, " of ", output.size(), margin));
    } else if (outcome.completion_tokens.value_or(-1) != static_cast<int64_t>(output.size())) {
      fail(absl::StrCat("text matches but usage.completion_tokens is ", outcome.completion_tokens.value_or(-1),
                        ", not ", output.size()));
    }
  }
  if (report.cases == 0) return absl::InvalidArgumentError(absl::StrCat(reference_path.string(), " has no cases"));
  return report;
}

}  // namespace sluice::loadtest
