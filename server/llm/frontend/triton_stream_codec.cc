#include "server/llm/frontend/triton_stream_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/kserve/grpc_codec.h"

namespace sluice {
namespace {

using Json = rapidjson::Value;

absl::Status Bad(absl::string_view message) { return absl::InvalidArgumentError(message); }

// A sampling value as the wire gave it: JSON and request parameters allow numbers, numeric strings, booleans
// and (for stop) string lists.
struct LooseValue {
  std::optional<double> number;
  std::optional<uint64_t> exact;  // set when the wire carried a non-negative integer exactly
  std::optional<bool> flag;
  std::optional<std::string> text;
  std::optional<std::vector<std::string>> list;
};

absl::StatusOr<double> Number(const LooseValue& v, absl::string_view key) {
  if (v.number) return *v.number;
  double parsed = 0;
  if (v.text && absl::SimpleAtod(*v.text, &parsed) && std::isfinite(parsed)) return parsed;
  return Bad(absl::StrCat("'", key, "' must be a number"));
}

absl::StatusOr<int64_t> Integer(const LooseValue& v, absl::string_view key) {
  int64_t parsed = 0;
  if (v.text && absl::SimpleAtoi(*v.text, &parsed)) return parsed;
  absl::StatusOr<double> d = Number(v, key);
  if (!d.ok() || std::floor(*d) != *d || std::fabs(*d) > 9.0e18) return Bad(absl::StrCat("'", key, "' must be an integer"));
  return static_cast<int64_t>(*d);
}

int ClampToInt(int64_t value) {
  return static_cast<int>(std::clamp<int64_t>(value, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
}

// Applies one sampling key. `strict`: unknown keys are refused (sampling_parameters); request parameters are a
// general map and keep the keys sluice does not know (Triton's own among them).
absl::Status Apply(absl::string_view key, const LooseValue& v, bool strict, TritonGenerateRequest& out) {
  GenerationCall& call = out.call;
  if (key == "temperature" || key == "top_p") {
    absl::StatusOr<double> d = Number(v, key);
    if (!d.ok()) return d.status();
    (key == "temperature" ? call.sampling.temperature : call.sampling.top_p) = static_cast<float>(*d);
  } else if (key == "top_k" || key == "max_tokens") {
    absl::StatusOr<int64_t> i = Integer(v, key);
    if (!i.ok()) return i.status();
    if (key == "top_k") {
      call.sampling.top_k = *i == -1 ? 0 : ClampToInt(*i);  // vLLM's -1: all tokens
    } else {
      call.max_tokens = *i;  // as given: the range check (GenerationModel) reports the real value
    }
  } else if (key == "seed" || key == "random_seed") {
    if (v.exact) {
      call.sampling.seed = *v.exact;
    } else {
      absl::StatusOr<int64_t> i = Integer(v, key);
      if (!i.ok()) return i.status();
      call.sampling.seed = static_cast<uint64_t>(*i);
    }
  } else if (key == "ignore_eos") {
    if (v.flag) {
      call.ignore_eos = *v.flag;
    } else if (v.text && (*v.text == "true" || *v.text == "false")) {
      call.ignore_eos = *v.text == "true";
    } else {
      return Bad("'ignore_eos' must be a boolean");
    }
  } else if (key == "stop") {
    if (v.text) {
      call.stop = {*v.text};
    } else if (v.list) {
      call.stop = *v.list;
    } else {
      return Bad("'stop' must be a string or an array of strings");
    }
  } else if (strict) {
    return Bad(absl::StrCat("sampling parameter '", key,
                            "' is not supported (temperature, top_p, top_k, seed, stop, ignore_eos, max_tokens)"));
  }
  return absl::OkStatus();
}

absl::Status ApplySamplingJson(absl::string_view text, TritonGenerateRequest& out) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(text.data(), text.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return Bad(absl::StrCat("'sampling_parameters' must be a JSON object",
                            doc.HasParseError() ? absl::StrCat(" (", rapidjson::GetParseError_En(doc.GetParseError()),
                                                               " at offset ", doc.GetErrorOffset(), ")")
                                                : ""));
  }
  const Json& object = doc;
  for (const auto& member : object.GetObject()) {
    const std::string key(member.name.GetString(), member.name.GetStringLength());
    const Json& value = member.value;
    LooseValue v;
    if (value.IsNull()) continue;
    if (value.IsBool()) v.flag = value.GetBool();
    if (value.IsNumber()) v.number = value.GetDouble();
    if (value.IsUint64()) v.exact = value.GetUint64();
    if (value.IsString()) v.text = std::string(value.GetString(), value.GetStringLength());
    if (value.IsArray()) {
      std::vector<std::string> list;
      for (const Json& s : value.GetArray()) {
        if (!s.IsString()) return Bad(absl::StrCat("'", key, "' must be a string or an array of strings"));
        list.emplace_back(s.GetString(), s.GetStringLength());
      }
      v.list = std::move(list);
    }
    if (absl::Status s = Apply(key, v, /*strict=*/true, out); !s.ok()) {
      return Bad(absl::StrCat("sampling_parameters: ", s.message()));
    }
  }
  return absl::OkStatus();
}

// The one element of a BYTES tensor [1].
absl::StatusOr<std::string> OneString(const WireTensor& tensor) {
  if (tensor.datatype != "BYTES") return Bad(absl::StrCat("input '", tensor.name, "' must be BYTES"));
  const std::string_view bytes = tensor.bytes;
  uint32_t length = 0;
  if (bytes.size() >= 4) std::memcpy(&length, bytes.data(), 4);  // little-endian hosts only, as Triton
  if (bytes.size() < 4 || bytes.size() - 4 != length) {
    return Bad(absl::StrCat("input '", tensor.name, "' must hold exactly one BYTES element"));
  }
  return std::string(bytes.substr(4));
}

// The one element of a numeric or BOOL tensor [1].
absl::StatusOr<LooseValue> OneScalar(const WireTensor& tensor) {
  const std::string& type = tensor.datatype;
  const size_t size = type == "BOOL" ? 1 : (type == "INT32" || type == "UINT32" || type == "FP32") ? 4
                    : (type == "INT64" || type == "UINT64" || type == "FP64")                     ? 8
                                                                                                  : 0;
  if (size == 0) return Bad(absl::StrCat("input '", tensor.name, "' has datatype ", type, "; expected a number"));
  if (tensor.bytes.size() != size) return Bad(absl::StrCat("input '", tensor.name, "' must hold exactly one element"));
  auto read = [&tensor](auto value) {
    std::memcpy(&value, tensor.bytes.data(), sizeof value);
    return value;
  };
  LooseValue v;
  if (type == "BOOL") v.flag = read(uint8_t{0}) != 0;
  if (type == "INT32") v.number = read(int32_t{0});
  if (type == "UINT32") v.number = read(uint32_t{0});
  if (type == "FP32") v.number = read(float{0});
  if (type == "FP64") v.number = read(double{0});
  if (type == "INT64") v.number = static_cast<double>(read(int64_t{0}));
  if (type == "UINT64") {
    v.exact = read(uint64_t{0});
    v.number = static_cast<double>(*v.exact);
  }
  if (type == "INT64" && read(int64_t{0}) >= 0) v.exact = static_cast<uint64_t>(read(int64_t{0}));
  return v;
}

absl::StatusOr<bool> OneBool(const WireTensor& tensor) {
  if (tensor.datatype != "BOOL") return Bad(absl::StrCat("input '", tensor.name, "' must be BOOL"));
  absl::StatusOr<LooseValue> v = OneScalar(tensor);
  if (!v.ok()) return v.status();
  return *v->flag;
}

absl::Status ApplyParameters(const InferParameters& parameters, TritonGenerateRequest& out,
                             std::optional<bool>& stream) {
  for (const auto& [key, value] : parameters) {
    if (key == "triton_enable_empty_final_response" || key == "stream") {
      const bool* flag = std::get_if<bool>(&value);
      if (flag == nullptr) return Bad(absl::StrCat("parameter '", key, "' must be a boolean"));
      if (key == "stream") {
        stream = *flag;
      } else {
        out.empty_final = *flag;
      }
      continue;
    }
    LooseValue v;
    if (const bool* b = std::get_if<bool>(&value)) v.flag = *b;
    if (const int64_t* i = std::get_if<int64_t>(&value)) {
      v.number = static_cast<double>(*i);
      if (*i >= 0) v.exact = static_cast<uint64_t>(*i);
    }
    if (const uint64_t* u = std::get_if<uint64_t>(&value)) {
      v.number = static_cast<double>(*u);
      v.exact = *u;
    }
    if (const double* d = std::get_if<double>(&value)) v.number = *d;
    if (const std::string* s = std::get_if<std::string>(&value)) v.text = *s;
    if (absl::Status s = Apply(key, v, /*strict=*/false, out); !s.ok()) {
      return Bad(absl::StrCat("parameter ", s.message()));
    }
  }
  return absl::OkStatus();
}

void SetFinal(inference::ModelInferResponse& response, bool final) {
  (*response.mutable_parameters())["triton_final_response"].set_bool_param(final);
}

}  // namespace

std::string SerializeBytesElement(absl::string_view element) {
  const uint32_t length = static_cast<uint32_t>(element.size());
  std::string out(4, '\0');
  std::memcpy(out.data(), &length, 4);
  out.append(element.data(), element.size());
  return out;
}

absl::StatusOr<TritonGenerateRequest> DecodeTritonGenerate(const inference::ModelInferRequest& request) {
  absl::StatusOr<GrpcInferCall> decoded = DecodeInferRequest(request);
  if (!decoded.ok()) return decoded.status();
  InferCall& wire = decoded->call;
  // Typed BYTES contents (the KServe decoder leaves them to validation): serialized as raw BYTES would be.
  for (int i = 0; i < request.inputs_size() && !decoded->raw; ++i) {
    const auto& contents = request.inputs(i).contents().bytes_contents();
    if (request.inputs(i).datatype() != "BYTES") continue;
    std::string& bytes = wire.storage.emplace_back();
    for (const std::string& element : contents) bytes += SerializeBytesElement(element);
    wire.inputs[i].bytes = bytes;
  }
  TritonGenerateRequest out;
  out.model = request.model_name();
  out.id = request.id();
  out.call.sampling.temperature = 1.0f;  // vLLM's defaults
  out.call.sampling.top_p = 1.0f;
  std::optional<bool> stream, exclude_input;
  if (absl::Status s = ApplyParameters(wire.parameters, out, stream); !s.ok()) return s;
  // sampling_parameters first, so that the dedicated inputs win over it.
  for (const WireTensor& input : wire.inputs) {
    if (input.name != "sampling_parameters") continue;
    absl::StatusOr<std::string> json = OneString(input);
    if (!json.ok()) return json.status();
    if (absl::Status s = ApplySamplingJson(*json, out); !s.ok()) return s;
  }
  for (const WireTensor& input : wire.inputs) {
    const std::string& name = input.name;
    if (name == "sampling_parameters") continue;
    if (name == "text_input") {
      absl::StatusOr<std::string> text = OneString(input);
      if (!text.ok()) return text.status();
      out.call.prompt = *std::move(text);
    } else if (name == "stream" || name == "exclude_input_in_output") {
      absl::StatusOr<bool> flag = OneBool(input);
      if (!flag.ok()) return flag.status();
      (name == "stream" ? stream : exclude_input) = *flag;
    } else if (name == "max_tokens" || name == "temperature" || name == "top_p" || name == "top_k" ||
               name == "random_seed") {
      absl::StatusOr<LooseValue> value = OneScalar(input);
      if (!value.ok()) return value.status();
      if (absl::Status s = Apply(name, *value, /*strict=*/true, out); !s.ok()) return s;
    } else {
      return Bad(absl::StrCat("input '", name, "' is not one of text_input, max_tokens, stream, sampling_parameters, "
                              "exclude_input_in_output, temperature, top_p, top_k, random_seed"));
    }
  }
  if (!out.call.prompt) return Bad("input 'text_input' is required");
  for (const std::string& output : wire.requested_outputs) {
    if (output != "text_output") return Bad(absl::StrCat("output '", output, "' unknown: the output is text_output"));
  }
  out.stream = stream.value_or(false);
  if (out.stream && exclude_input == false) {
    return Bad("exclude_input_in_output = false (the prompt in the output) is not supported with stream = true");
  }
  out.call.echo = !out.stream && !exclude_input.value_or(false);
  return out;
}

void EncodeTritonText(absl::string_view model, absl::string_view id, const std::string* text, bool final,
                      inference::ModelStreamInferResponse& response) {
  response.Clear();
  inference::ModelInferResponse& infer = *response.mutable_infer_response();
  infer.set_model_name(std::string(model));
  infer.set_model_version("1");
  infer.set_id(std::string(id));
  SetFinal(infer, final);
  if (text == nullptr) return;
  auto* output = infer.add_outputs();
  output->set_name("text_output");
  output->set_datatype("BYTES");
  output->add_shape(1);
  infer.add_raw_output_contents(SerializeBytesElement(*text));
}

void EncodeTritonError(absl::string_view model, absl::string_view id, const absl::Status& status,
                       inference::ModelStreamInferResponse& response) {
  EncodeTritonText(model, id, nullptr, /*final=*/true, response);
  response.set_error_message(std::string(status.message()));
}

namespace {

struct IoSpec {
  const char* name;
  const char* datatype;
  inference::DataType type;
  int64_t dim;
  bool optional;
};
constexpr IoSpec kInputs[] = {
    {"text_input", "BYTES", inference::TYPE_STRING, 1, false},
    {"max_tokens", "INT32", inference::TYPE_INT32, 1, true},
    {"stream", "BOOL", inference::TYPE_BOOL, 1, true},
    {"sampling_parameters", "BYTES", inference::TYPE_STRING, 1, true},
    {"exclude_input_in_output", "BOOL", inference::TYPE_BOOL, 1, true},
};
constexpr IoSpec kOutput = {"text_output", "BYTES", inference::TYPE_STRING, -1, false};

}  // namespace

void FillGenerationModelMetadata(const ModelConfig& model, inference::ModelMetadataResponse& response) {
  response.set_name(model.name);
  response.add_versions("1");
  response.set_platform("sluice_generation");
  auto fill = [](const IoSpec& spec, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(spec.name);
    out->set_datatype(spec.datatype);
    out->add_shape(spec.dim);
  };
  for (const IoSpec& spec : kInputs) fill(spec, response.add_inputs());
  fill(kOutput, response.add_outputs());
}

void FillGenerationModelConfig(const ModelConfig& model, inference::ModelConfig& config) {
  config.set_name(model.name);
  config.set_platform("sluice_generation");
  config.set_backend("sluice");
  config.set_max_batch_size(0);
  for (const IoSpec& spec : kInputs) {
    auto* input = config.add_input();
    input->set_name(spec.name);
    input->set_data_type(spec.type);
    input->add_dims(spec.dim);
    input->set_optional(spec.optional);
  }
  auto* output = config.add_output();
  output->set_name(kOutput.name);
  output->set_data_type(kOutput.type);
  output->add_dims(kOutput.dim);
}

}  // namespace sluice
