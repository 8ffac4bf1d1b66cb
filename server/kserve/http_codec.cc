#include "server/kserve/http_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

#include <rapidjson/document.h>
#include <rapidjson/error/en.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/strings/str_cat.h"

namespace sluice {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;
using Json = rapidjson::Value;

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

// Appends one JSON scalar as a little-endian element of `datatype`.
absl::Status PutScalar(const Json& value, const std::string& name, const std::string& datatype, size_t index,
                       std::string& out) {
  auto put = [&out](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  if (datatype == "FP32" && value.IsNumber()) {
    // A double beyond float's range becomes +-Inf explicitly (the cast would be undefined); validation refuses it.
    const double d = value.GetDouble();
    const float inf = std::numeric_limits<float>::infinity();
    const float f = std::fabs(d) > std::numeric_limits<float>::max() ? (d < 0 ? -inf : inf) : static_cast<float>(d);
    put(f);
  } else if (datatype == "INT64" && value.IsInt64()) {
    put(value.GetInt64());
  } else if (datatype == "INT32" && value.IsInt()) {
    put(static_cast<int32_t>(value.GetInt()));
  } else if (datatype == "BOOL" && value.IsBool()) {
    put(static_cast<uint8_t>(value.GetBool()));
  } else {
    return Bad(absl::StrCat("input '", name, "': data element ", index, " is not a ", datatype, " value"));
  }
  return absl::OkStatus();
}

// Flattens (possibly nested) JSON data into bytes, row-major. Iterative: the nesting depth costs heap, bounded by
// kMaxJsonDataDepth, never stack.
absl::Status FlattenData(const Json& data, const std::string& name, const std::string& datatype, std::string& out) {
  if (!data.IsArray()) return PutScalar(data, name, datatype, 0, out);
  struct Level {
    const Json* array;
    rapidjson::SizeType next;
  };
  std::vector<Level> stack = {{&data, 0}};
  size_t index = 0;
  while (!stack.empty()) {
    Level& top = stack.back();
    if (top.next == top.array->Size()) {
      stack.pop_back();
      continue;
    }
    const Json& value = (*top.array)[top.next++];
    if (!value.IsArray()) {
      if (absl::Status s = PutScalar(value, name, datatype, index++, out); !s.ok()) return s;
    } else if (stack.size() >= static_cast<size_t>(kMaxJsonDataDepth)) {
      return Bad(absl::StrCat("input '", name, "': data is nested deeper than ", kMaxJsonDataDepth, " levels"));
    } else {
      stack.push_back({&value, 0});
    }
  }
  return absl::OkStatus();
}

// JSON can carry only these datatypes' values; for any other the bytes stay empty and validation names the
// datatype against the model's (rather than complaining about the data).
bool JsonConvertible(const std::string& datatype) {
  return datatype == "FP32" || datatype == "INT64" || datatype == "INT32" || datatype == "BOOL";
}

absl::StatusOr<ParameterValue> ParameterFromJson(const std::string& key, const Json& value) {
  if (value.IsBool()) return ParameterValue(value.GetBool());
  if (value.IsInt64()) return ParameterValue(value.GetInt64());
  if (value.IsUint64()) return ParameterValue(value.GetUint64());
  if (value.IsNumber()) return ParameterValue(value.GetDouble());
  if (value.IsString()) return ParameterValue(std::string(value.GetString(), value.GetStringLength()));
  return Bad(absl::StrCat("parameter '", key, "' must be a boolean, a number or a string"));
}

absl::Status ReadParameters(const Json& params, InferParameters& out) {
  if (!params.IsObject()) return Bad("'parameters' must be an object");
  for (const auto& member : params.GetObject()) {
    const std::string key(member.name.GetString(), member.name.GetStringLength());
    absl::StatusOr<ParameterValue> value = ParameterFromJson(key, member.value);
    if (!value.ok()) return value.status();
    out.emplace_back(key, *std::move(value));
  }
  return absl::OkStatus();
}

const Json* Member(const Json& object, const char* key) {
  auto it = object.FindMember(key);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

// One entry of "inputs": its tensor, with bytes from the binary section (advancing `binary_offset`) or from JSON.
absl::Status ReadInput(const Json& input, const std::string& body, size_t& binary_offset, InferCall& call) {
  const Json* name = input.IsObject() ? Member(input, "name") : nullptr;
  const Json* datatype = input.IsObject() ? Member(input, "datatype") : nullptr;
  const Json* shape = input.IsObject() ? Member(input, "shape") : nullptr;
  if (!name || !name->IsString() || !datatype || !datatype->IsString() || !shape || !shape->IsArray()) {
    return Bad("each input needs 'name' (string), 'datatype' (string) and 'shape' (array)");
  }
  WireTensor tensor{name->GetString(), datatype->GetString(), {}, {}};
  for (const auto& d : shape->GetArray()) {
    if (!d.IsInt64()) return Bad(absl::StrCat("input '", tensor.name, "': shape must hold integers"));
    tensor.shape.push_back(d.GetInt64());
  }
  const Json* params = Member(input, "parameters");
  const Json* binary_size = params && params->IsObject() ? Member(*params, "binary_data_size") : nullptr;
  if (binary_size != nullptr) {
    if (!binary_size->IsUint64()) {
      return Bad(absl::StrCat("input '", tensor.name, "': binary_data_size must be a non-negative integer"));
    }
    const uint64_t size = binary_size->GetUint64();
    if (size > body.size() - binary_offset) {  // no overflow: binary_offset <= body.size()
      return Bad(absl::StrCat("input '", tensor.name, "': binary_data_size ", size, " runs past the body's end"));
    }
    tensor.bytes = std::string_view(body).substr(binary_offset, size);
    binary_offset += size;
  } else {
    const Json* data = Member(input, "data");
    if (data == nullptr) return Bad(absl::StrCat("input '", tensor.name, "' has no 'data'"));
    std::string& bytes = call.storage.emplace_back();
    if (JsonConvertible(tensor.datatype)) {
      if (absl::Status s = FlattenData(*data, tensor.name, tensor.datatype, bytes); !s.ok()) return s;
    }
    tensor.bytes = bytes;
  }
  call.inputs.push_back(std::move(tensor));
  return absl::OkStatus();
}

absl::Status ReadOutputs(const Json& outputs, HttpInferCall& request) {
  if (!outputs.IsArray()) return Bad("'outputs' must be an array");
  for (const auto& output : outputs.GetArray()) {
    const Json* name = output.IsObject() ? Member(output, "name") : nullptr;
    if (name == nullptr || !name->IsString()) return Bad("each requested output needs a 'name' (string)");
    request.call.requested_outputs.push_back(name->GetString());
    std::optional<bool> binary;
    const Json* params = Member(output, "parameters");
    if (const Json* flag = params && params->IsObject() ? Member(*params, "binary_data") : nullptr) {
      if (!flag->IsBool()) return Bad(absl::StrCat("output '", name->GetString(), "': binary_data must be a boolean"));
      binary = flag->GetBool();
    }
    request.binary_output.push_back(binary);
  }
  return absl::OkStatus();
}

void WriteData(Writer& w, const HostTensor& tensor) {
  w.StartArray();
  switch (tensor.dtype) {
    case DataType::kFp32: for (float v : tensor.values<float>()) w.Double(v); break;
    case DataType::kInt64: for (int64_t v : tensor.values<int64_t>()) w.Int64(v); break;
    case DataType::kInt32: for (int32_t v : tensor.values<int32_t>()) w.Int(v); break;
    case DataType::kBool: for (uint8_t v : tensor.values<uint8_t>()) w.Bool(v != 0); break;
    case DataType::kFp16: break;  // FP16 only travels as binary data
  }
  w.EndArray();
}

}  // namespace

absl::StatusOr<HttpInferCall> DecodeHttpInfer(const std::string& body, std::optional<size_t> header_length) {
  const size_t json_length = header_length.value_or(body.size());
  if (json_length > body.size()) {
    return Bad(absl::StrCat("Inference-Header-Content-Length ", json_length, " exceeds the body's ", body.size(),
                            " bytes"));
  }
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseIterativeFlag>(body.data(), json_length);
  if (doc.HasParseError()) {
    return Bad(absl::StrCat("malformed JSON at offset ", doc.GetErrorOffset(), ": ",
                            rapidjson::GetParseError_En(doc.GetParseError())));
  }
  if (!doc.IsObject()) return Bad("request body must be a JSON object");
  HttpInferCall request;
  if (const Json* id = Member(doc, "id")) {
    if (!id->IsString()) return Bad("'id' must be a string");
    request.call.id = id->GetString();
  }
  if (const Json* params = Member(doc, "parameters")) {
    if (absl::Status s = ReadParameters(*params, request.call.parameters); !s.ok()) return s;
  }
  const Json* inputs = Member(doc, "inputs");
  if (inputs == nullptr || !inputs->IsArray()) return Bad("'inputs' must be an array");
  size_t binary_offset = json_length;
  for (const auto& input : inputs->GetArray()) {
    if (absl::Status s = ReadInput(input, body, binary_offset, request.call); !s.ok()) return s;
  }
  if (binary_offset != body.size()) {
    return Bad(absl::StrCat(body.size() - binary_offset, " bytes of binary data are not claimed by any input"));
  }
  if (const Json* outputs = Member(doc, "outputs")) {
    if (absl::Status s = ReadOutputs(*outputs, request); !s.ok()) return s;
  }
  return request;
}

HttpBody EncodeHttpInfer(const ModelConfig& model, const std::string& id,
                         const std::vector<std::optional<bool>>& binary_output, const InferResult& result) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  std::string binary;
  w.StartObject();
  w.Key("model_name");
  w.String(model.name.c_str());
  w.Key("model_version");
  w.String("1");
  if (!id.empty()) {
    w.Key("id");
    w.String(id.data(), static_cast<rapidjson::SizeType>(id.size()));
  }
  const bool binary_default = result.options.binary_data_output.value_or(false);
  w.Key("outputs");
  w.StartArray();
  for (size_t i = 0; i < result.outputs.size(); ++i) {
    const HostTensor& tensor = result.outputs[i].tensor;
    const std::optional<bool> own = i < binary_output.size() ? binary_output[i] : std::nullopt;
    const bool as_binary = own.value_or(binary_default) || tensor.dtype == DataType::kFp16;
    w.StartObject();
    w.Key("name");
    w.String(result.outputs[i].spec->name.c_str());
    w.Key("datatype");
    w.String(DataTypeName(tensor.dtype));
    w.Key("shape");
    w.StartArray();
    for (int64_t d : tensor.shape) w.Int64(d);
    w.EndArray();
    if (as_binary) {
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(tensor.bytes.size());
      w.EndObject();
      binary.append(reinterpret_cast<const char*>(tensor.bytes.data()), tensor.bytes.size());
    } else {
      w.Key("data");
      WriteData(w, tensor);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  HttpBody out{std::string(buffer.GetString(), buffer.GetSize()), std::nullopt};
  if (!binary.empty()) {
    out.header_length = out.body.size();
    out.body += binary;
  }
  return out;
}

std::string ErrorJson(absl::string_view message) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("error");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace sluice
