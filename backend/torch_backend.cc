#include "backend/torch_backend.h"

#include <torch/script.h>

#include <chrono>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/torch_device.h"
#include "backend/torch_weights.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

torch::ScalarType ToTorch(DataType dtype) {
  switch (dtype) {
    case DataType::kBool: return torch::kBool;
    case DataType::kInt32: return torch::kInt32;
    case DataType::kInt64: return torch::kInt64;
    case DataType::kFp16: return torch::kHalf;
    case DataType::kFp32: return torch::kFloat32;
  }
  return torch::kFloat32;
}

std::string BucketName(const ModelConfig& model, int batch_size, int64_t length) {
  return absl::StrCat(model.name, " bucket (batch ", batch_size, ", length ", length, ")");
}

class TorchBackend final : public Backend {
 public:
  TorchBackend(const InstanceOptions& options, TorchTarget target, InstanceThreads threads)
      : model_(*options.model), group_(options.group), replica_(options.replica), target_(target),
        device_(target.device), threads_(threads) {}

  // Runs on the loading thread, under this instance's threads and CPUs for the duration (warm-up timings).
  absl::Status LoadAll(int warmup_runs) {
    ScopedInstanceThreads scope(threads_);
    SLUICE_RETURN_IF_ERROR(scope.status());
    memory_.graph_format = GraphFormatOf(model_);
    if (memory_.graph_format == kGraphFormatVersion) {
      SLUICE_ASSIGN_OR_RETURN(weights_, SharedTorchWeights(model_, target_));
      memory_.weight_bytes = weights_->bytes;
      memory_.weights_id = weights_->id;
    }
    for (int batch_size : model_.buckets.batch_sizes) {
      for (int64_t length : model_.buckets.lengths) {
        SLUICE_RETURN_IF_ERROR(LoadBucket(batch_size, length, warmup_runs));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<BatchResult> Execute(const PaddedBatch& batch) override {
    SLUICE_RETURN_IF_ERROR(ValidatePaddedBatch(model_, batch));
    auto graph = graphs_.find({batch.batch_size, batch.length});
    if (graph == graphs_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(BucketName(model_, batch.batch_size, batch.length), " is not compiled"));
    }
    // On the instance's own thread (the scheduler's): the first call pins it and sizes its pools.
    SLUICE_RETURN_IF_ERROR(threads_.ApplyToCallingThread());
    try {
      return Run(graph->second, batch);
    } catch (const std::exception& e) {  // c10::Error derives from std::exception
      return absl::InternalError(absl::StrCat(BucketName(model_, batch.batch_size, batch.length), " on ",
                                              Describe(), " failed: ", e.what()));
    }
  }

  const std::vector<BucketLoadStats>& load_stats() const override { return stats_; }
  InstanceMemory memory() const override { return memory_; }

  std::string Describe() const override {
    std::string where(DeviceKindName(group_.device));
    if (group_.cores) where += absl::StrCat(" cores ", group_.cores->ToString());
    if (target_.neuron_cores) where += absl::StrCat(" (", target_.neuron_cores->ToString(), ")");
    return absl::StrCat(model_.name, "#", replica_, " on ", where, " (", group_.intra_op_threads,
                        " intra-op thread", group_.intra_op_threads == 1 ? "" : "s", ")");
  }

 private:
  absl::Status LoadBucket(int batch_size, int64_t length, int warmup_runs) {
    const std::string path = model_.GraphPath(batch_size, length);
    BucketLoadStats stats{batch_size, length, 0, 0};
    const auto load_start = Clock::now();
    // Device neuron: onto this replica's NeuronCores (torch_device.h).
    absl::StatusOr<torch::jit::Module> module = LoadTorchGraph(target_, path);
    if (!module.ok()) {
      return absl::Status(module.status().code(), absl::StrCat("cannot load ", BucketName(model_, batch_size, length),
                                                               " from ", path, ": ", module.status().message()));
    }
    module->eval();
    stats.load_seconds = SecondsSince(load_start);
    memory_.graph_bytes += GraphFileBytes(path);
    ++memory_.graphs;
    graphs_.emplace(std::make_pair(batch_size, length), std::move(*module));
    const auto warm_start = Clock::now();
    for (int i = 0; i < warmup_runs; ++i) {
      const auto run_start = Clock::now();
      absl::StatusOr<BatchResult> result = Execute(FullZeroBatch(batch_size, length));
      if (!result.ok()) return result.status();
      stats.steady_seconds = SecondsSince(run_start);
    }
    stats.warm_seconds = SecondsSince(warm_start);
    stats_.push_back(stats);
    return absl::OkStatus();
  }

  // Every row at full length: warms the whole graph, including the widest masks.
  PaddedBatch FullZeroBatch(int batch_size, int64_t length) const {
    PaddedBatch batch{batch_size, length, {}, std::vector<int64_t>(batch_size, length)};
    for (const TensorSpec& input : model_.inputs) {
      std::vector<int64_t> shape = {batch_size, length};
      for (size_t d = 1; d < input.shape.size(); ++d) shape.push_back(input.shape[d]);
      batch.inputs.push_back(HostTensor::Zeros(input.dtype, std::move(shape)));
    }
    return batch;
  }

  BatchResult Run(torch::jit::Module& graph, const PaddedBatch& batch) {
    torch::InferenceMode inference_mode;
    std::vector<torch::jit::IValue> args;
    for (const HostTensor& input : batch.inputs) {
      // from_blob borrows the bytes (no copy); graphs never write to their inputs.
      auto tensor = torch::from_blob(const_cast<std::byte*>(input.bytes.data()), input.shape,
                                     torch::TensorOptions().dtype(ToTorch(input.dtype)));
      args.emplace_back(tensor.to(device_));
    }
    std::vector<int64_t> lengths = batch.row_lengths;
    args.emplace_back(torch::from_blob(lengths.data(), {batch.batch_size}, torch::kInt64).to(device_));
    if (weights_) args.insert(args.end(), weights_->tensors.begin(), weights_->tensors.end());  // graph format 2

    torch::jit::IValue returned = graph.forward(args);
    if (!returned.isTuple()) throw std::runtime_error("graph must return a tuple (see backend/compile/README.md)");
    const auto& elements = returned.toTupleRef().elements();
    const size_t expected = model_.outputs.size() + (model_.has_variable_output() ? 1 : 0);
    if (elements.size() != expected) {
      throw std::runtime_error(absl::StrCat("graph returned ", elements.size(), " tensors, config declares ",
                                            expected, " (outputs, plus output lengths if an axis is -1)"));
    }
    BatchResult result;
    for (size_t i = 0; i < model_.outputs.size(); ++i) {
      result.outputs.push_back(ToHost(elements[i].toTensor(), model_.outputs[i], batch.batch_size));
    }
    if (model_.has_variable_output()) {
      torch::Tensor out_lengths = elements.back().toTensor().to(torch::kCPU, torch::kInt64).contiguous();
      result.output_lengths.assign(out_lengths.data_ptr<int64_t>(),
                                   out_lengths.data_ptr<int64_t>() + out_lengths.numel());
    }
    return result;
  }

  static HostTensor ToHost(const torch::Tensor& tensor, const TensorSpec& spec, int batch_size) {
    if (tensor.scalar_type() != ToTorch(spec.dtype)) {
      throw std::runtime_error(absl::StrCat("output '", spec.name, "' has dtype ",
                                            std::string(c10::toString(tensor.scalar_type())), ", config declares ",
                                            DataTypeName(spec.dtype)));
    }
    if (tensor.dim() != static_cast<int64_t>(spec.shape.size()) + 1 || tensor.size(0) != batch_size) {
      throw std::runtime_error(absl::StrCat("output '", spec.name, "' has shape ",
                                            ShapeToString(tensor.sizes().vec()), ", expected [", batch_size,
                                            "] + ", ShapeToString(spec.shape)));
    }
    torch::Tensor cpu = tensor.to(torch::kCPU).contiguous();
    HostTensor host;
    host.dtype = spec.dtype;
    host.shape = cpu.sizes().vec();
    const auto* begin = static_cast<const std::byte*>(cpu.data_ptr());
    host.bytes.assign(begin, begin + cpu.nbytes());
    return host;
  }

  const ModelConfig& model_;
  const InstanceGroup group_;
  const int replica_;
  const TorchTarget target_;
  const torch::Device device_;  // target_.device
  const InstanceThreads threads_;
  std::shared_ptr<const TorchWeights> weights_;  // graph format 2: bound to every graph; null for format 1
  InstanceMemory memory_;
  std::map<std::pair<int, int64_t>, torch::jit::Module> graphs_;
  std::vector<BucketLoadStats> stats_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateTorchBackend(const InstanceOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(TorchTarget target, ChooseTorchTarget(options));
  SLUICE_ASSIGN_OR_RETURN(InstanceThreads threads, InstanceThreads::Create(options));
  auto backend = std::make_unique<TorchBackend>(options, target, threads);
  SLUICE_RETURN_IF_ERROR(backend->LoadAll(options.warmup_runs));
  return backend;
}

}  // namespace sluice
