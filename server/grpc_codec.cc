#include "server/grpc_codec.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/model_parameters.h"

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

inference::DataType TritonType(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return inference::TYPE_BOOL;
    case DataType::kInt32: return inference::TYPE_INT32;
    case DataType::kInt64: return inference::TYPE_INT64;
    case DataType::kFp16: return inference::TYPE_FP16;
    case DataType::kFp32: return inference::TYPE_FP32;
  }
  return inference::TYPE_INVALID;
}

void FillDuration(const DurationStat& in, inference::StatisticDuration* out) {
  out->set_count(in.count);
  out->set_ns(in.ns);
}

}  // namespace

absl::StatusOr<DecodedInferRequest> DecodeInferRequest(const inference::ModelInferRequest& request) {
  DecodedInferRequest decoded;
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
      tensor.bytes = decoded.storage.emplace_back(TypedBytes(input));
    }
    decoded.inputs.push_back(std::move(tensor));
  }
  for (const auto& output : request.outputs()) decoded.requested_outputs.push_back(output.name());
  return decoded;
}

absl::Status ApplyInferParameters(const google::protobuf::Map<std::string, inference::InferParameter>& parameters,
                                  absl::Time now, SubmitOptions& options) {
  for (const auto& [key, value] : parameters) {
    if (key != "priority" && key != "timeout") continue;  // other parameters (e.g. binary_data_output) are hints
    int64_t number;
    if (value.has_int64_param()) {
      number = value.int64_param();
    } else if (value.has_uint64_param()) {
      number = static_cast<int64_t>(value.uint64_param());
    } else {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' must be an integer"));
    }
    if (number < 0) return absl::InvalidArgumentError(absl::StrCat("parameter '", key, "' must not be negative"));
    if (key == "priority") {
      options.priority = static_cast<int>(number);
    } else if (number > 0) {
      options.deadline = std::min(options.deadline, now + absl::Microseconds(number));
    }
  }
  return absl::OkStatus();
}

void EncodeInferResponse(const ModelConfig& model, const inference::ModelInferRequest& request,
                         const std::vector<size_t>& selected, std::vector<HostTensor> outputs, bool raw,
                         inference::ModelInferResponse& response) {
  response.set_model_name(model.name);
  response.set_model_version("1");
  response.set_id(request.id());
  for (size_t index : selected) {
    HostTensor& tensor = outputs[index];
    auto* out = response.add_outputs();
    out->set_name(model.outputs[index].name);
    out->set_datatype(DataTypeName(tensor.dtype));
    for (int64_t d : tensor.shape) out->add_shape(d);
    if (raw || tensor.dtype == DataType::kFp16) {
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

void FillModelMetadata(const ModelConfig& model, inference::ModelMetadataResponse& response) {
  response.set_name(model.name);
  response.add_versions("1");
  response.set_platform("sluice_torchscript");
  auto fill = [](const TensorSpec& spec, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(spec.name);
    out->set_datatype(DataTypeName(spec.dtype));
    for (int64_t d : BatchedShape(spec)) out->add_shape(d);
  };
  for (const TensorSpec& spec : model.inputs) fill(spec, response.add_inputs());
  for (const TensorSpec& spec : model.outputs) fill(spec, response.add_outputs());
}

void FillModelConfig(const ModelConfig& model, inference::ModelConfig& config) {
  config.set_name(model.name);
  config.set_platform("sluice_torchscript");
  config.set_backend("sluice");
  config.set_max_batch_size(model.max_batch_size());
  for (const TensorSpec& spec : model.inputs) {
    auto* input = config.add_input();
    input->set_name(spec.name);
    input->set_data_type(TritonType(spec.dtype));
    for (int64_t d : spec.shape) input->add_dims(d);
    input->set_allow_ragged_batch(spec.has_variable_axis());
  }
  for (const TensorSpec& spec : model.outputs) {
    auto* output = config.add_output();
    output->set_name(spec.name);
    output->set_data_type(TritonType(spec.dtype));
    for (int64_t d : spec.shape) output->add_dims(d);
  }
  auto* batching = config.mutable_dynamic_batching();
  for (int b : model.buckets.batch_sizes) batching->add_preferred_batch_size(b);
  batching->set_max_queue_delay_microseconds(static_cast<uint64_t>(model.batching.max_queue_delay_ms * 1000));
  batching->mutable_default_queue_policy()->set_max_queue_size(model.batching.max_queue_size);
  batching->mutable_default_queue_policy()->set_allow_timeout_override(true);
  for (const InstanceGroup& group : model.instances) {
    auto* instances = config.add_instance_group();
    instances->set_name(absl::StrCat(model.name, "_", DeviceKindName(group.device)));
    instances->set_count(group.count);
    instances->set_kind(group.device == DeviceKind::kCuda ? inference::ModelInstanceGroup::KIND_GPU
                        : group.device == DeviceKind::kCpu ? inference::ModelInstanceGroup::KIND_CPU
                                                           : inference::ModelInstanceGroup::KIND_MODEL);
  }
  for (const auto& [key, value] : ModelConfigParameters(model)) {
    (*config.mutable_parameters())[key].set_string_value(value);
  }
}

void FillModelStatistics(const ModelConfig& model, const ModelStatsSnapshot& stats, inference::ModelStatistics& out) {
  out.set_name(model.name);
  out.set_version("1");
  out.set_last_inference(stats.last_inference_ms);
  out.set_inference_count(stats.inference_count);
  out.set_execution_count(stats.execution_count);
  auto* infer = out.mutable_inference_stats();
  FillDuration(stats.success, infer->mutable_success());
  FillDuration(stats.fail, infer->mutable_fail());
  FillDuration(stats.queue, infer->mutable_queue());
  FillDuration(stats.compute_infer, infer->mutable_compute_infer());
  FillDuration(stats.compute_input, infer->mutable_compute_input());
  FillDuration(stats.compute_output, infer->mutable_compute_output());
  for (const auto& [batch_size, batch] : stats.batch) {
    auto* b = out.add_batch_stats();
    b->set_batch_size(batch_size);
    FillDuration(PerExecution(batch.compute_input, batch.executions), b->mutable_compute_input());
    FillDuration(PerExecution(batch.compute_infer, batch.executions), b->mutable_compute_infer());
    FillDuration(PerExecution(batch.compute_output, batch.executions), b->mutable_compute_output());
  }
}

}  // namespace sluice
