#include "server/kserve/model_descriptions.h"

#include "absl/strings/str_cat.h"
#include "server/core/input_validation.h"
#include "server/core/model_parameters.h"

namespace sluice {
namespace {

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
  // Triton's meaning, which is sluice's: priorities 1..priority_levels (1 highest), 0 = default_priority_level.
  batching->set_priority_levels(static_cast<uint64_t>(model.batching.priority_levels));
  batching->set_default_priority_level(static_cast<uint64_t>(model.batching.default_priority_level));
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

void FillServerMetadata(inference::ServerMetadataResponse& response) {
  response.set_name("sluice");
  response.set_version("0.1.0");
  for (const char* extension : {"model_configuration", "statistics", "schedule_policy", "binary_tensor_data"}) {
    response.add_extensions(extension);
  }
}

}  // namespace sluice
