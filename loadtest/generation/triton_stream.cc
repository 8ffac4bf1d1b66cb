#include "loadtest/generation/triton_stream.h"

#include <cstdint>
#include <cstring>
#include <utility>

#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "loadtest/kserve/infer_client.h"

namespace sluice::loadtest {
namespace {

std::string BytesElement(absl::string_view element) {
  const uint32_t length = static_cast<uint32_t>(element.size());
  std::string out(4, '\0');
  std::memcpy(out.data(), &length, 4);  // little-endian hosts, as Triton
  out.append(element.data(), element.size());
  return out;
}

void AddInput(inference::ModelInferRequest& request, const char* name, const char* datatype, std::string raw) {
  auto* input = request.add_inputs();
  input->set_name(name);
  input->set_datatype(datatype);
  input->add_shape(1);
  request.add_raw_input_contents(std::move(raw));
}

std::string SamplingJson(const GenerationSpec& spec) {
  rapidjson::StringBuffer buffer;
  rapidjson::Writer<rapidjson::StringBuffer> w(buffer);
  w.StartObject();
  if (spec.max_tokens > 0) {
    w.Key("max_tokens");
    w.Int64(spec.max_tokens);
  }
  w.Key("ignore_eos");
  w.Bool(spec.ignore_eos);
  if (spec.temperature) {
    w.Key("temperature");
    w.Double(*spec.temperature);
  }
  if (spec.seed) {
    w.Key("seed");
    w.Int64(*spec.seed);
  }
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

// The elements of a raw BYTES tensor, joined.
absl::StatusOr<std::string> JoinBytesElements(absl::string_view raw) {
  std::string joined;
  while (!raw.empty()) {
    uint32_t length = 0;
    if (raw.size() < 4) return absl::InvalidArgumentError("text_output: a BYTES element without its length");
    std::memcpy(&length, raw.data(), 4);
    raw.remove_prefix(4);
    if (raw.size() < length) return absl::InvalidArgumentError("text_output: a BYTES element past the data's end");
    joined.append(raw.data(), length);
    raw.remove_prefix(length);
  }
  return joined;
}

}  // namespace

absl::Status EncodeTritonGenerate(const GenerationSpec& spec, const std::string& id,
                                  inference::ModelInferRequest& request) {
  if (!spec.prompt_ids.empty() && spec.prompt_text.empty()) {
    return absl::InvalidArgumentError("ModelStreamInfer takes text prompts (text_input), not token ids");
  }
  request.Clear();
  request.set_model_name(spec.model);
  request.set_id(id);
  AddInput(request, "text_input", "BYTES", BytesElement(spec.prompt_text));
  AddInput(request, "stream", "BOOL", std::string(1, '\1'));
  AddInput(request, "exclude_input_in_output", "BOOL", std::string(1, '\1'));
  AddInput(request, "sampling_parameters", "BYTES", BytesElement(SamplingJson(spec)));
  (*request.mutable_parameters())["triton_enable_empty_final_response"].set_bool_param(true);
  request.add_outputs()->set_name("text_output");
  return absl::OkStatus();
}

absl::StatusOr<TritonResponse> ParseTritonResponse(const inference::ModelStreamInferResponse& response) {
  TritonResponse out;
  const inference::ModelInferResponse& infer = response.infer_response();
  out.id = infer.id();
  if (!response.error_message().empty()) {
    out.error_message = response.error_message();
    out.final = true;
  }
  if (auto it = infer.parameters().find("triton_final_response"); it != infer.parameters().end()) {
    out.final = out.final || it->second.bool_param();
  }
  for (int i = 0; i < infer.outputs_size(); ++i) {
    const inference::ModelInferResponse::InferOutputTensor& output = infer.outputs(i);
    if (output.name() != "text_output") continue;
    std::string text;
    if (i < infer.raw_output_contents_size()) {
      absl::StatusOr<std::string> joined = JoinBytesElements(infer.raw_output_contents(i));
      if (!joined.ok()) return joined.status();
      text = *std::move(joined);
    } else {
      for (const std::string& element : output.contents().bytes_contents()) text += element;
    }
    out.text = text;
  }
  return out;
}

void TritonStreamState::Fail(std::string message) {
  if (outcome_.error_message) return;
  outcome_.error_message = std::move(message);
  outcome_.error_type = "protocol";
}

void TritonStreamState::Feed(const inference::ModelStreamInferResponse& response, double at_s) {
  absl::StatusOr<TritonResponse> parsed = ParseTritonResponse(response);
  if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
  if (outcome_.done) return Fail("a response after the final response");
  if (parsed->error_message) {
    if (!outcome_.error_message) outcome_.error_message = parsed->error_message;
    outcome_.done = true;
    return;
  }
  if (parsed->id != id_) {
    return Fail(absl::StrCat("a response for request id '", parsed->id, "' on the stream of request '", id_, "'"));
  }
  if (parsed->text && !parsed->text->empty()) {
    outcome_.chunk_times_s.push_back(at_s);
    outcome_.text += *parsed->text;
  }
  if (parsed->final) outcome_.done = true;
}

StreamVerdict JudgeTritonStream(GenerationOutcome& o, const GenerationSpec& spec) {
  o.prompt_tokens = spec.prompt_tokens;
  if (o.error_message) {
    return {o.error_type == "protocol" ? 13 : CodeForTritonError(*o.error_message), *o.error_message};  // INTERNAL
  }
  if (!o.done) return {14, "the stream ended without a final response (triton_final_response)"};  // UNAVAILABLE
  if (spec.max_tokens > 0 && o.chunks() > spec.max_tokens) {
    return {kUsageMismatchCode, absl::StrCat(o.chunks(), " text responses streamed but max_tokens is ",
                                             spec.max_tokens)};
  }
  o.completion_tokens = spec.ignore_eos && spec.max_tokens > 0 ? spec.max_tokens : o.chunks();
  o.finish_reason = spec.ignore_eos && spec.max_tokens > 0 ? "length" : "";
  return {};
}

int CodeForTritonError(absl::string_view message) {
  const std::string m = absl::AsciiStrToLower(message);
  auto any = [&m](std::initializer_list<absl::string_view> words) {
    for (absl::string_view word : words) {
      if (absl::StrContains(m, word)) return true;
    }
    return false;
  };
  if (any({"unknown model", "not found", "not a text-generation model", "has no version"})) return 5;  // NOT_FOUND
  if (any({"queue is full", "queue full", "resource exhausted"})) return 8;  // RESOURCE_EXHAUSTED
  if (any({"deadline", "timed out", "timeout"})) return 4;                 // DEADLINE_EXCEEDED
  if (any({"draining", "not ready", "loading", "unavailable"})) return 14;  // UNAVAILABLE
  if (any({"cancelled", "canceled"})) return 1;                            // CANCELLED
  if (any({"must", "exceeds", "at most", "at least", "not supported", "is required", "is empty", "invalid",
           "unknown: the output", "is not one of", "fills model", "expected"})) {
    return 3;  // INVALID_ARGUMENT
  }
  return 2;  // UNKNOWN
}

absl::Status CheckGenerationMetadata(const inference::ModelMetadataResponse& metadata) {
  bool text_input = false, text_output = false;
  std::vector<std::string> inputs;
  for (const auto& input : metadata.inputs()) {
    inputs.push_back(absl::StrCat(input.name(), " (", input.datatype(), ")"));
    if (input.name() == "text_input" && input.datatype() == "BYTES") text_input = true;
  }
  for (const auto& output : metadata.outputs()) text_output = text_output || output.name() == "text_output";
  if (text_input && text_output) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "model ", metadata.name(), " is not a text-generation model as ModelStreamInfer serves it (an input text_input "
      "of BYTES and an output text_output); its inputs: ", inputs.empty() ? "none" : absl::StrJoin(inputs, ", ")));
}

}  // namespace sluice::loadtest
