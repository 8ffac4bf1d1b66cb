#include "loadtest/kserve/kserve_http.h"

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace sluice::loadtest {
namespace {

using Writer = rapidjson::Writer<rapidjson::StringBuffer>;

void String(Writer& w, const std::string& s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }

// Bytes per element of a KServe datatype; 0 for BYTES and unknown names.
size_t ElementSize(const std::string& datatype) {
  if (datatype == "BOOL" || datatype == "UINT8" || datatype == "INT8") return 1;
  if (datatype == "INT16" || datatype == "UINT16" || datatype == "FP16" || datatype == "BF16") return 2;
  if (datatype == "INT32" || datatype == "UINT32" || datatype == "FP32") return 4;
  if (datatype == "INT64" || datatype == "UINT64" || datatype == "FP64") return 8;
  return 0;
}

template <typename T>
void Append(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Appends JSON "data" (flat or nested arrays) as raw bytes of `datatype`.
absl::Status AppendData(const rapidjson::Value& data, const std::string& datatype, std::string& out) {
  if (data.IsArray()) {
    for (const auto& v : data.GetArray()) {
      if (absl::Status s = AppendData(v, datatype, out); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  const bool number = data.IsNumber();
  if (datatype == "BOOL" && data.IsBool()) {
    Append<uint8_t>(out, data.GetBool() ? 1 : 0);
  } else if (datatype == "FP32" && number) {
    Append<float>(out, static_cast<float>(data.GetDouble()));
  } else if (datatype == "FP64" && number) {
    Append<double>(out, data.GetDouble());
  } else if (datatype == "INT64" && data.IsInt64()) {
    Append<int64_t>(out, data.GetInt64());
  } else if (datatype == "INT32" && data.IsInt()) {
    Append<int32_t>(out, data.GetInt());
  } else if (datatype == "UINT8" && data.IsUint()) {
    Append<uint8_t>(out, static_cast<uint8_t>(data.GetUint()));
  } else {
    return absl::UnimplementedError(absl::StrCat("cannot decode JSON data of datatype ", datatype));
  }
  return absl::OkStatus();
}

}  // namespace

HttpInferBody EncodeHttpInferRequest(const inference::ModelInferRequest& request, int64_t timeout_us) {
  rapidjson::StringBuffer buffer;
  Writer w(buffer);
  w.StartObject();
  if (!request.id().empty()) {
    w.Key("id");
    String(w, request.id());
  }
  w.Key("inputs");
  w.StartArray();
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    w.StartObject();
    w.Key("name");
    String(w, input.name());
    w.Key("datatype");
    String(w, input.datatype());
    w.Key("shape");
    w.StartArray();
    for (int64_t d : input.shape()) w.Int64(d);
    w.EndArray();
    w.Key("parameters");
    w.StartObject();
    w.Key("binary_data_size");
    w.Uint64(i < request.raw_input_contents_size() ? request.raw_input_contents(i).size() : 0);
    w.EndObject();
    w.EndObject();
  }
  w.EndArray();
  w.Key("parameters");
  w.StartObject();
  w.Key("binary_data_output");
  w.Bool(true);
  if (timeout_us > 0) {
    w.Key("timeout");
    w.Int64(timeout_us);
  }
  for (const auto& [key, value] : request.parameters()) {
    if (key == "binary_data_output" || key == "timeout") continue;
    if (value.parameter_choice_case() == inference::InferParameter::kInt64Param) {
      w.Key(key.c_str());
      w.Int64(value.int64_param());
    } else if (value.parameter_choice_case() == inference::InferParameter::kBoolParam) {
      w.Key(key.c_str());
      w.Bool(value.bool_param());
    } else if (value.parameter_choice_case() == inference::InferParameter::kStringParam) {
      w.Key(key.c_str());
      String(w, value.string_param());
    }
  }
  w.EndObject();
  w.EndObject();

  HttpInferBody out;
  out.body = buffer.GetString();
  out.header_length = out.body.size();
  for (const std::string& raw : request.raw_input_contents()) out.body += raw;
  return out;
}

absl::StatusOr<inference::ModelInferResponse> DecodeHttpInferResponse(const std::string& body,
                                                                      std::optional<size_t> header_length) {
  const size_t json_size = header_length.value_or(body.size());
  if (json_size > body.size()) {
    return absl::DataLossError(absl::StrCat("Inference-Header-Content-Length ", json_size, " is past the body's ",
                                            body.size(), " bytes"));
  }
  rapidjson::Document doc;
  doc.Parse(body.data(), json_size);
  if (doc.HasParseError() || !doc.IsObject()) return absl::DataLossError("the response header is not a JSON object");
  inference::ModelInferResponse response;
  if (doc.HasMember("model_name") && doc["model_name"].IsString()) {
    response.set_model_name(doc["model_name"].GetString());
  }
  if (doc.HasMember("model_version") && doc["model_version"].IsString()) {
    response.set_model_version(doc["model_version"].GetString());
  }
  if (doc.HasMember("id") && doc["id"].IsString()) response.set_id(doc["id"].GetString());
  if (!doc.HasMember("outputs") || !doc["outputs"].IsArray()) return response;
  size_t offset = json_size;
  for (const auto& output : doc["outputs"].GetArray()) {
    if (!output.IsObject() || !output.HasMember("name") || !output["name"].IsString() ||
        !output.HasMember("datatype") || !output["datatype"].IsString() || !output.HasMember("shape") ||
        !output["shape"].IsArray()) {
      return absl::DataLossError("a response output lacks name, datatype or shape");
    }
    auto* tensor = response.add_outputs();
    tensor->set_name(output["name"].GetString());
    tensor->set_datatype(output["datatype"].GetString());
    int64_t elements = 1;
    for (const auto& d : output["shape"].GetArray()) {
      if (!d.IsInt64()) return absl::DataLossError(absl::StrCat("output ", tensor->name(), ": bad shape"));
      tensor->add_shape(d.GetInt64());
      elements *= d.GetInt64();
    }
    std::string* raw = response.add_raw_output_contents();
    const rapidjson::Value* size = nullptr;
    if (output.HasMember("parameters") && output["parameters"].IsObject() &&
        output["parameters"].HasMember("binary_data_size")) {
      size = &output["parameters"]["binary_data_size"];
    }
    if (size != nullptr) {
      if (!size->IsUint64() || size->GetUint64() > body.size() - offset) {
        return absl::DataLossError(absl::StrCat("output ", tensor->name(), ": binary_data_size runs past the body"));
      }
      raw->assign(body, offset, size->GetUint64());
      offset += size->GetUint64();
    } else if (output.HasMember("data")) {
      if (absl::Status s = AppendData(output["data"], tensor->datatype(), *raw); !s.ok()) return s;
      const size_t element = ElementSize(tensor->datatype());
      if (element > 0 && raw->size() != static_cast<size_t>(elements) * element) {
        return absl::DataLossError(absl::StrCat("output ", tensor->name(), ": ", raw->size() / element,
                                                " data elements for shape of ", elements));
      }
    } else {
      return absl::DataLossError(absl::StrCat("output ", tensor->name(), " has neither data nor binary_data_size"));
    }
  }
  return response;
}

std::string HttpErrorMessage(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse(body.c_str());
  if (!doc.HasParseError() && doc.IsObject() && doc.HasMember("error") && doc["error"].IsString()) {
    return doc["error"].GetString();
  }
  return body.substr(0, 200);
}

}  // namespace sluice::loadtest
