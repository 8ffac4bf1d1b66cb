#include "server/kserve/grpc_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace sluice {
namespace {

template <typename T, typename Repeated>
std::string ToBytes(const Repeated& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  for (int i = 0; i < values.size(); ++i) {
    const T value = static_cast<T>(values[i]);
    std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
  }
  return bytes;
}

// Typed contents in the field Triton uses for the tensor's datatype; unknown datatypes give no bytes (the
// validator then reports the datatype).
std::string TypedBytes(const inference::ModelInferRequest::InferInputTensor& input) {
  const auto& c = input.contents();
  if (input.datatype() == "FP32") return ToBytes<float>(c.fp32_contents());
  if (input.datatype() == "INT64") return ToBytes<int64_t>(c.int64_contents());
  if (input.datatype() == "INT32") return ToBytes<int32_t>(c.int_contents());
  if (input.datatype() == "BOOL") return ToBytes<uint8_t>(c.bool_contents());
  return {};
}

bool HasTypedContents(const inference::InferTensorContents& c) {
  return c.bool_contents_size() || c.int_contents_size() || c.int64_contents_size() || c.uint_contents_size() ||
         c.uint64_contents_size() || c.fp32_contents_size() || c.fp64_contents_size() || c.bytes_contents_size();
}

template <typename T, typename Repeated>
void AppendTyped(const HostTensor& tensor, Repeated* out) {
  for (T value : tensor.values<T>()) out->Add(value);
}

}  // namespace

absl::StatusOr<InferParameters> DecodeInferParameters(
    const google::protobuf::Map<std::string, inference::InferParameter>& parameters) {
  InferParameters decoded;
  for (const auto& [key, value] : parameters) {
    switch (value.parameter_choice_case()) {
      case inference::InferParameter::kBoolParam: decoded.emplace_back(key, value.bool_param()); break;
      case inference::InferParameter::kInt64Param: decoded.emplace_back(key, value.int64_param()); break;
      case inference::InferParameter::kUint64Param: decoded.emplace_back(key, value.uint64_param()); break;
      case inference::InferParameter::kDoubleParam: decoded.emplace_back(key, value.double_param()); break;
      case inference::InferParameter::kStringParam: decoded.emplace_back(key, value.string_param()); break;
      case inference::InferParameter::PARAMETER_CHOICE_NOT_SET:
        return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' has no value"));
    }
  }
  return decoded;
}

absl::StatusOr<GrpcInferCall> DecodeInferRequest(const inference::ModelInferRequest& request) {
  GrpcInferCall decoded;
  InferCall& call = decoded.call;
  call.id = request.id();
  decoded.raw = request.raw_input_contents_size() > 0;
  if (decoded.raw && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("raw_input_contents has ", request.raw_input_contents_size(),
                                                   " entries for ", request.inputs_size(), " inputs"));
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    WireTensor tensor{input.name(), input.datatype(), {input.shape().begin(), input.shape().end()}, {}};
    if (decoded.raw) {
      if (HasTypedContents(input.contents())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "input '", input.name(), "' carries typed contents although raw_input_contents is used"));
      }
      tensor.bytes = request.raw_input_contents(i);
    } else {
      tensor.bytes = call.storage.emplace_back(TypedBytes(input));
    }
    call.inputs.push_back(std::move(tensor));
  }
  for (const auto& output : request.outputs()) call.requested_outputs.push_back(output.name());
  absl::StatusOr<InferParameters> parameters = DecodeInferParameters(request.parameters());
  if (!parameters.ok()) return parameters.status();
  call.parameters = *std::move(parameters);
  return decoded;
}

void EncodeInferResponse(const ModelConfig& model, const std::string& id, InferResult result, bool raw,
                         inference::ModelInferResponse& response) {
  response.set_model_name(model.name);
  response.set_model_version("1");
  response.set_id(id);
  // raw_output_contents, when used, must hold one entry per output: an FP16 output (which has no typed field)
  // therefore turns the whole answer raw.
  for (const InferOutput& output : result.outputs) raw = raw || output.tensor.dtype == DataType::kFp16;
  for (InferOutput& output : result.outputs) {
    const HostTensor& tensor = output.tensor;
    auto* out = response.add_outputs();
    out->set_name(output.spec->name);
    out->set_datatype(DataTypeName(tensor.dtype));
    for (int64_t d : tensor.shape) out->add_shape(d);
    if (raw) {
      response.add_raw_output_contents()->assign(reinterpret_cast<const char*>(tensor.bytes.data()),
                                                 tensor.bytes.size());
      continue;
    }
    auto* c = out->mutable_contents();
    switch (tensor.dtype) {
      case DataType::kFp32: AppendTyped<float>(tensor, c->mutable_fp32_contents()); break;
      case DataType::kInt64: AppendTyped<int64_t>(tensor, c->mutable_int64_contents()); break;
      case DataType::kInt32: AppendTyped<int32_t>(tensor, c->mutable_int_contents()); break;
      case DataType::kBool: AppendTyped<uint8_t>(tensor, c->mutable_bool_contents()); break;
      case DataType::kFp16: break;
    }
  }
}

}  // namespace sluice
