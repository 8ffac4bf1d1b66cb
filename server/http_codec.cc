#include "server/http_codec.h"

#include <cmath>
#include <cstring>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "absl/strings/str_cat.h"
#include "server/model_parameters.h"

namespace sluice {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

// Flattens (possibly nested) JSON data into little-endian bytes of `datatype`.
absl::Status AppendJson(const rapidjson::Value& value, const std::string& name, const std::string& datatype,
                        std::string& out) {
  if (value.IsArray()) {
    for (const auto& element : value.GetArray()) {
      if (absl::Status s = AppendJson(element, name, datatype, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  auto put = [&out](auto v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
  if (datatype == "FP32" && value.IsNumber()) {
    put(static_cast<float>(value.GetDouble()));
  } else if (datatype == "INT64" && value.IsInt64()) {
    put(value.GetInt64());
  } else if (datatype == "INT32" && value.IsInt()) {
    put(static_cast<int32_t>(value.GetInt()));
  } else if (datatype == "BOOL" && value.IsBool()) {
    put(static_cast<uint8_t>(value.GetBool()));
  } else {
    return Bad(absl::StrCat("input '", name, "': data element is not a ", datatype, " value"));
  }
  return absl::OkStatus();
}

absl::Status ReadParameters(const rapidjson::Value& params, absl::Time now, HttpInferRequest& request) {
  if (!params.IsObject()) return Bad("'parameters' must be an object");
  for (const auto& member : params.GetObject()) {
    const std::string key = member.name.GetString();
    if (key == "binary_data_output") {
      if (!member.value.IsBool()) return Bad("parameter 'binary_data_output' must be a boolean");
      request.binary_default = member.value.GetBool();
    } else if (key == "priority" || key == "timeout") {
      if (!member.value.IsInt64() || member.value.GetInt64() < 0) {
        return Bad(absl::StrCat("parameter '", key, "' must be a non-negative integer"));
      }
      const int64_t number = member.value.GetInt64();
      if (key == "priority") {
        request.options.priority = static_cast<int>(number);
      } else if (number > 0) {
        request.options.deadline = std::min(request.options.deadline, now + absl::Microseconds(number));
      }
    }
  }
  return absl::OkStatus();
}

void WriteShape(Writer& w, const std::vector<int64_t>& shape) {
  w.StartArray();
  for (int64_t d : shape) w.Int64(d);
  w.EndArray();
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

void WriteTensorSpec(Writer& w, const TensorSpec& spec, bool batched) {
  w.StartObject();
  w.Key("name");
  w.String(spec.name.c_str());
  w.Key(batched ? "datatype" : "data_type");
  w.String(batched ? DataTypeName(spec.dtype) : absl::StrCat("TYPE_", DataTypeName(spec.dtype)).c_str());
  w.Key(batched ? "shape" : "dims");
  WriteShape(w, batched ? BatchedShape(spec) : spec.shape);
  w.EndObject();
}

void WriteDuration(Writer& w, const char* key, const DurationStat& d) {
  w.Key(key);
  w.StartObject();
  w.Key("count");
  w.Uint64(d.count);
  w.Key("ns");
  w.Uint64(d.ns);
  w.EndObject();
}

}  // namespace

absl::StatusOr<HttpInferRequest> DecodeHttpInfer(const std::string& body, std::optional<size_t> header_length,
                                                 absl::Time now) {
  const size_t json_length = header_length.value_or(body.size());
  if (json_length > body.size()) {
    return Bad(absl::StrCat("Inference-Header-Content-Length ", json_length, " exceeds the body's ", body.size(),
                            " bytes"));
  }
  rapidjson::Document doc;
  doc.Parse(body.data(), json_length);
  if (doc.HasParseError()) {
    return Bad(absl::StrCat("malformed JSON at offset ", doc.GetErrorOffset()));
  }
  if (!doc.IsObject()) return Bad("request body must be a JSON object");
  HttpInferRequest request;
  if (doc.HasMember("id") && doc["id"].IsString()) request.id = doc["id"].GetString();
  if (doc.HasMember("parameters")) {
    if (absl::Status s = ReadParameters(doc["parameters"], now, request); !s.ok()) return s;
  }
  if (!doc.HasMember("inputs") || !doc["inputs"].IsArray()) return Bad("'inputs' must be an array");
  size_t binary_offset = json_length;
  for (const auto& input : doc["inputs"].GetArray()) {
    if (!input.IsObject() || !input.HasMember("name") || !input["name"].IsString() || !input.HasMember("datatype") ||
        !input["datatype"].IsString() || !input.HasMember("shape") || !input["shape"].IsArray()) {
      return Bad("each input needs 'name', 'datatype' and 'shape'");
    }
    WireTensor tensor{input["name"].GetString(), input["datatype"].GetString(), {}, {}};
    for (const auto& d : input["shape"].GetArray()) {
      if (!d.IsInt64()) return Bad(absl::StrCat("input '", tensor.name, "': shape must hold integers"));
      tensor.shape.push_back(d.GetInt64());
    }
    const rapidjson::Value* binary_size = nullptr;
    if (input.HasMember("parameters") && input["parameters"].IsObject() &&
        input["parameters"].HasMember("binary_data_size")) {
      binary_size = &input["parameters"]["binary_data_size"];
    }
    if (binary_size != nullptr) {
      if (!binary_size->IsUint64()) return Bad(absl::StrCat("input '", tensor.name, "': bad binary_data_size"));
      const uint64_t size = binary_size->GetUint64();
      if (binary_offset + size > body.size()) {
        return Bad(absl::StrCat("input '", tensor.name, "': binary_data_size ", size, " runs past the body's end"));
      }
      tensor.bytes = std::string_view(body).substr(binary_offset, size);
      binary_offset += size;
    } else {
      if (!input.HasMember("data")) return Bad(absl::StrCat("input '", tensor.name, "' has no 'data'"));
      std::string& bytes = request.storage.emplace_back();
      if (absl::Status s = AppendJson(input["data"], tensor.name, tensor.datatype, bytes); !s.ok()) return s;
      tensor.bytes = bytes;
    }
    request.inputs.push_back(std::move(tensor));
  }
  if (binary_offset != body.size()) {
    return Bad(absl::StrCat(body.size() - binary_offset, " bytes of binary data are not claimed by any input"));
  }
  if (doc.HasMember("outputs")) {
    if (!doc["outputs"].IsArray()) return Bad("'outputs' must be an array");
    for (const auto& output : doc["outputs"].GetArray()) {
      if (!output.IsObject() || !output.HasMember("name") || !output["name"].IsString()) {
        return Bad("each requested output needs a 'name'");
      }
      request.requested_outputs.push_back(output["name"].GetString());
      bool binary = request.binary_default;
      if (output.HasMember("parameters") && output["parameters"].IsObject() &&
          output["parameters"].HasMember("binary_data") && output["parameters"]["binary_data"].IsBool()) {
        binary = output["parameters"]["binary_data"].GetBool();
      }
      request.binary_output.push_back(binary);
    }
  }
  return request;
}

HttpBody EncodeHttpInfer(const ModelConfig& model, const HttpInferRequest& request,
                         const std::vector<size_t>& selected, const std::vector<HostTensor>& outputs) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  std::string binary;
  w.StartObject();
  w.Key("model_name");
  w.String(model.name.c_str());
  w.Key("model_version");
  w.String("1");
  if (!request.id.empty()) {
    w.Key("id");
    w.String(request.id.c_str());
  }
  w.Key("outputs");
  w.StartArray();
  for (size_t i = 0; i < selected.size(); ++i) {
    const HostTensor& tensor = outputs[selected[i]];
    const bool as_binary = (request.binary_output.empty() ? request.binary_default : request.binary_output[i]) ||
                           tensor.dtype == DataType::kFp16;
    w.StartObject();
    w.Key("name");
    w.String(model.outputs[selected[i]].name.c_str());
    w.Key("datatype");
    w.String(DataTypeName(tensor.dtype));
    w.Key("shape");
    WriteShape(w, tensor.shape);
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
  HttpBody out{buffer.GetString(), std::nullopt};
  if (!binary.empty()) {
    out.header_length = out.body.size();
    out.body += binary;
  }
  return out;
}

std::string ErrorJson(const std::string& message) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("error");
  w.String(message.data(), static_cast<rapidjson::SizeType>(message.size()));
  w.EndObject();
  return buffer.GetString();
}

std::string ModelMetadataJson(const ModelConfig& model) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("name");
  w.String(model.name.c_str());
  w.Key("versions");
  w.StartArray();
  w.String("1");
  w.EndArray();
  w.Key("platform");
  w.String("sluice_torchscript");
  w.Key("inputs");
  w.StartArray();
  for (const TensorSpec& spec : model.inputs) WriteTensorSpec(w, spec, true);
  w.EndArray();
  w.Key("outputs");
  w.StartArray();
  for (const TensorSpec& spec : model.outputs) WriteTensorSpec(w, spec, true);
  w.EndArray();
  w.EndObject();
  return buffer.GetString();
}

std::string ModelConfigJson(const ModelConfig& model) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("name");
  w.String(model.name.c_str());
  w.Key("platform");
  w.String("sluice_torchscript");
  w.Key("backend");
  w.String("sluice");
  w.Key("max_batch_size");
  w.Int(model.max_batch_size());
  w.Key("input");
  w.StartArray();
  for (const TensorSpec& spec : model.inputs) WriteTensorSpec(w, spec, false);
  w.EndArray();
  w.Key("output");
  w.StartArray();
  for (const TensorSpec& spec : model.outputs) WriteTensorSpec(w, spec, false);
  w.EndArray();
  w.Key("dynamic_batching");
  w.StartObject();
  w.Key("preferred_batch_size");
  w.StartArray();
  for (int b : model.buckets.batch_sizes) w.Int(b);
  w.EndArray();
  w.Key("max_queue_delay_microseconds");
  w.Uint64(static_cast<uint64_t>(model.batching.max_queue_delay_ms * 1000));
  w.Key("default_queue_policy");
  w.StartObject();
  w.Key("max_queue_size");
  w.Int(model.batching.max_queue_size);
  w.Key("allow_timeout_override");
  w.Bool(true);
  w.EndObject();
  w.EndObject();
  w.Key("instance_group");
  w.StartArray();
  for (const InstanceGroup& group : model.instances) {
    w.StartObject();
    w.Key("count");
    w.Int(group.count);
    w.Key("kind");
    w.String(group.device == DeviceKind::kCuda  ? "KIND_GPU"
             : group.device == DeviceKind::kCpu ? "KIND_CPU"
                                                : "KIND_MODEL");
    w.EndObject();
  }
  w.EndArray();
  w.Key("parameters");  // as Triton's JSON ModelConfig writes them: {"key": {"string_value": "..."}}
  w.StartObject();
  for (const auto& [key, value] : ModelConfigParameters(model)) {
    w.Key(key.c_str());
    w.StartObject();
    w.Key("string_value");
    w.String(value.c_str());
    w.EndObject();
  }
  w.EndObject();
  w.EndObject();
  return buffer.GetString();
}

std::string ModelStatsJson(const std::vector<std::pair<const ModelConfig*, ModelStatsSnapshot>>& models) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  w.Key("model_stats");
  w.StartArray();
  for (const auto& [model, stats] : models) {
    w.StartObject();
    w.Key("name");
    w.String(model->name.c_str());
    w.Key("version");
    w.String("1");
    w.Key("last_inference");
    w.Uint64(stats.last_inference_ms);
    w.Key("inference_count");
    w.Uint64(stats.inference_count);
    w.Key("execution_count");
    w.Uint64(stats.execution_count);
    w.Key("inference_stats");
    w.StartObject();
    WriteDuration(w, "success", stats.success);
    WriteDuration(w, "fail", stats.fail);
    WriteDuration(w, "queue", stats.queue);
    WriteDuration(w, "compute_input", stats.compute_input);
    WriteDuration(w, "compute_infer", stats.compute_infer);
    WriteDuration(w, "compute_output", stats.compute_output);
    w.EndObject();
    w.Key("batch_stats");
    w.StartArray();
    for (const auto& [size, batch] : stats.batch) {
      w.StartObject();
      w.Key("batch_size");
      w.Int(size);
      WriteDuration(w, "compute_input", PerExecution(batch.compute_input, batch.executions));
      WriteDuration(w, "compute_infer", PerExecution(batch.compute_infer, batch.executions));
      WriteDuration(w, "compute_output", PerExecution(batch.compute_output, batch.executions));
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return buffer.GetString();
}

}  // namespace sluice
