#include "loadtest/generation/generation_call.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {
namespace {

const inference::InferParameter* Param(const inference::ModelInferRequest& proto, const char* key) {
  auto it = proto.parameters().find(key);
  return it == proto.parameters().end() ? nullptr : &it->second;
}

}  // namespace

void GenerationSpecToProto(const GenerationSpec& spec, inference::ModelInferRequest& proto) {
  proto.set_model_name(spec.model);
  proto.clear_inputs();
  proto.clear_raw_input_contents();
  auto* input = proto.add_inputs();
  if (!spec.prompt_ids.empty()) {
    input->set_name("prompt_ids");
    input->set_datatype("INT32");
    input->add_shape(1);
    input->add_shape(static_cast<int64_t>(spec.prompt_ids.size()));
    proto.add_raw_input_contents(reinterpret_cast<const char*>(spec.prompt_ids.data()),
                                 spec.prompt_ids.size() * sizeof(int32_t));
  } else {
    input->set_name("text_input");
    input->set_datatype("BYTES");
    input->add_shape(1);
    proto.add_raw_input_contents(spec.prompt_text);
  }
  auto& params = *proto.mutable_parameters();
  params["max_tokens"].set_int64_param(spec.max_tokens);
  params["ignore_eos"].set_bool_param(spec.ignore_eos);
  params["chat"].set_bool_param(spec.chat);
  if (spec.temperature) params["temperature"].set_double_param(*spec.temperature);
  if (spec.seed) params["seed"].set_int64_param(*spec.seed);
  if (spec.prompt_tokens) params["prompt_tokens"].set_int64_param(*spec.prompt_tokens);
}

absl::StatusOr<GenerationSpec> GenerationSpecFromProto(const inference::ModelInferRequest& proto) {
  if (proto.inputs_size() != 1 || proto.raw_input_contents_size() != 1) {
    return absl::InvalidArgumentError("a generation request carries one prompt input");
  }
  GenerationSpec spec;
  spec.model = proto.model_name();
  const std::string& raw = proto.raw_input_contents(0);
  const std::string& datatype = proto.inputs(0).datatype();
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
  if (const auto* p = Param(proto, "max_tokens")) spec.max_tokens = p->int64_param();
  if (const auto* p = Param(proto, "ignore_eos")) spec.ignore_eos = p->bool_param();
  if (const auto* p = Param(proto, "chat")) spec.chat = p->bool_param();
  if (const auto* p = Param(proto, "temperature")) spec.temperature = p->double_param();
  if (const auto* p = Param(proto, "seed")) spec.seed = p->int64_param();
  if (const auto* p = Param(proto, "prompt_tokens")) spec.prompt_tokens = p->int64_param();
  if (spec.chat && spec.prompt_text.empty()) return absl::InvalidArgumentError("chat needs a text prompt");
  return spec;
}

void OutcomeToResponse(const GenerationOutcome& o, inference::ModelInferResponse& response) {
  auto& params = *response.mutable_parameters();
  params["prompt_tokens"].set_int64_param(o.prompt_tokens.value_or(0));
  params["completion_tokens"].set_int64_param(o.completion_tokens.value_or(0));
  params["finish_reason"].set_string_param(o.finish_reason);
  auto* text = response.add_outputs();
  text->set_name("text_output");
  text->set_datatype("BYTES");
  response.add_raw_output_contents(o.text);
  auto* times = response.add_outputs();
  times->set_name("chunk_times_s");
  times->set_datatype("FP64");
  times->add_shape(static_cast<int64_t>(o.chunk_times_s.size()));
  response.add_raw_output_contents(reinterpret_cast<const char*>(o.chunk_times_s.data()),
                                   o.chunk_times_s.size() * sizeof(double));
}

GenerationOutcome OutcomeFromResponse(const inference::ModelInferResponse& response) {
  GenerationOutcome o;
  auto param = [&](const char* key) -> const inference::InferParameter* {
    auto it = response.parameters().find(key);
    return it == response.parameters().end() ? nullptr : &it->second;
  };
  if (const auto* p = param("prompt_tokens")) o.prompt_tokens = p->int64_param();
  if (const auto* p = param("completion_tokens")) o.completion_tokens = p->int64_param();
  if (const auto* p = param("finish_reason")) o.finish_reason = p->string_param();
  o.done = true;
  for (int i = 0; i < response.outputs_size() && i < response.raw_output_contents_size(); ++i) {
    const std::string& raw = response.raw_output_contents(i);
    if (response.outputs(i).name() == "text_output") o.text = raw;
    if (response.outputs(i).name() == "chunk_times_s") {
      o.chunk_times_s.resize(raw.size() / sizeof(double));
      std::memcpy(o.chunk_times_s.data(), raw.data(), o.chunk_times_s.size() * sizeof(double));
    }
  }
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
