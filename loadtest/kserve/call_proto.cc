#include "loadtest/kserve/call_proto.h"

#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sluice::loadtest {
namespace {

void SetParameter(const CallParameter& value, inference::InferParameter& p) {
  if (const bool* b = std::get_if<bool>(&value)) p.set_bool_param(*b);
  if (const int64_t* i = std::get_if<int64_t>(&value)) p.set_int64_param(*i);
  if (const double* d = std::get_if<double>(&value)) p.set_double_param(*d);
  if (const std::string* s = std::get_if<std::string>(&value)) p.set_string_param(*s);
}

std::optional<CallParameter> GetParameter(const inference::InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kBoolParam: return p.bool_param();
    case inference::InferParameter::kInt64Param: return p.int64_param();
    case inference::InferParameter::kDoubleParam: return p.double_param();
    case inference::InferParameter::kStringParam: return p.string_param();
    default: return std::nullopt;
  }
}

template <typename T, typename Repeated>
std::string Pack(const Repeated& values) {
  std::string raw(values.size() * sizeof(T), '\0');
  for (int i = 0; i < values.size(); ++i) {
    const T v = static_cast<T>(values[i]);
    std::memcpy(raw.data() + i * sizeof(T), &v, sizeof(T));
  }
  return raw;
}

// An output sent as typed contents (a peer may answer so), as the raw bytes of its datatype.
std::string RawOfTypedContents(const std::string& datatype, const inference::InferTensorContents& c) {
  if (datatype == "FP32") return Pack<float>(c.fp32_contents());
  if (datatype == "FP64") return Pack<double>(c.fp64_contents());
  if (datatype == "INT64") return Pack<int64_t>(c.int64_contents());
  if (datatype == "INT32") return Pack<int32_t>(c.int_contents());
  if (datatype == "BOOL") return Pack<uint8_t>(c.bool_contents());
  return "";
}

}  // namespace

inference::ModelInferRequest RequestFromCall(const Call& call) {
  inference::ModelInferRequest request;
  request.set_model_name(call.model);
  request.set_id(call.wire_id());
  for (const CallTensor& tensor : call.inputs) {
    auto* input = request.add_inputs();
    input->set_name(tensor.name);
    input->set_datatype(tensor.datatype);
    for (int64_t d : tensor.shape) input->add_shape(d);
    request.add_raw_input_contents(tensor.raw);
  }
  for (const auto& [key, value] : call.parameters) SetParameter(value, (*request.mutable_parameters())[key]);
  return request;
}

Call CallFromRequest(const inference::ModelInferRequest& request) {
  Call call;
  call.model = request.model_name();
  if (!absl::SimpleAtoi(request.id(), &call.index) || absl::StrCat(call.index) != request.id()) {
    call.index = 0;
    call.id = request.id();
  }
  for (int i = 0; i < request.inputs_size(); ++i) {
    const auto& input = request.inputs(i);
    CallTensor tensor{input.name(), input.datatype(), {input.shape().begin(), input.shape().end()}, ""};
    if (i < request.raw_input_contents_size()) tensor.raw = request.raw_input_contents(i);
    call.inputs.push_back(std::move(tensor));
  }
  for (const auto& [key, value] : request.parameters()) {
    if (std::optional<CallParameter> p = GetParameter(value)) call.parameters.emplace_back(key, *std::move(p));
  }
  return call;
}

Outcome OutcomeFromResponse(const grpc::Status& status, const inference::ModelInferResponse& response) {
  Outcome outcome;
  outcome.code = static_cast<int>(status.error_code());
  outcome.message = status.error_message();
  if (!status.ok()) return outcome;
  for (int i = 0; i < response.outputs_size(); ++i) {
    const auto& output = response.outputs(i);
    CallTensor tensor{output.name(), output.datatype(), {output.shape().begin(), output.shape().end()}, ""};
    tensor.raw = i < response.raw_output_contents_size() ? response.raw_output_contents(i)
                                                         : RawOfTypedContents(output.datatype(), output.contents());
    outcome.outputs.push_back(std::move(tensor));
  }
  return outcome;
}

void OutputsToResponse(const Outcome& outcome, inference::ModelInferResponse& response) {
  for (const CallTensor& tensor : outcome.outputs) {
    auto* output = response.add_outputs();
    output->set_name(tensor.name);
    output->set_datatype(tensor.datatype);
    for (int64_t d : tensor.shape) output->add_shape(d);
    response.add_raw_output_contents(tensor.raw);
  }
}

}  // namespace sluice::loadtest
