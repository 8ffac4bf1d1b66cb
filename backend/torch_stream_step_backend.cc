// libtorch TorchScript StreamStepBackend (devices cpu, cuda; neuron unverified): see stream_step_backend.h and
// backend/compile/README.md "Cache-aware streaming" for the graph signature:
//   stream_step_b<B>: forward(audio f32[B, chunk_samples], lengths i64[B], slots i64[B], reset i64[B],
//                             state_0, ..., state_{n-1}, weights...) -> log_probs f32[B, frames_per_chunk, classes]
// Padding rows: audio zeros, length 0, the scratch slot, reset 1. Warm-up runs padding rows only.
#include <torch/script.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/stream_step_backend.h"
#include "backend/torch_device.h"
#include "backend/torch_weights.h"

namespace sluice {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

class TorchStreamStepBackend final : public StreamStepBackend {
 public:
  TorchStreamStepBackend(const InstanceOptions& options, const StreamStepOptions& step, TorchTarget target,
                         InstanceThreads threads)
      : model_(*options.model), step_(step), group_(options.group),
        replica_(options.replica), target_(target), device_(target.device), threads_(threads),
        scratch_slot_(step_.slots), classes_(static_cast<int64_t>(options.model->speech->vocabulary.size())) {}

  absl::Status LoadAll(int warmup_runs) {
    ScopedInstanceThreads scope(threads_);
    SLUICE_RETURN_IF_ERROR(scope.status());
    if (GraphFormatOf(model_) != kGraphFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat("model ", model_.name, ": stream_step graphs need graph "
                                                        "format 2 (weights.pt), found none in ", model_.directory));
    }
    SLUICE_ASSIGN_OR_RETURN(weights_, SharedTorchWeights(model_, target_));
    memory_.graph_format = kGraphFormatVersion;
    memory_.weight_bytes = weights_->bytes;
    memory_.weights_id = weights_->id;
    try {
      torch::InferenceMode inference_mode;
      for (const StreamStateSpec& spec : step_.states) {
        std::vector<int64_t> shape = {step_.slots + 1};
        shape.insert(shape.end(), spec.shape.begin(), spec.shape.end());
        states_.push_back(torch::zeros(shape, torch::TensorOptions().dtype(torch::kFloat32).device(device_)));
        memory_.cache_bytes += static_cast<int64_t>(states_.back().nbytes());
      }
    } catch (const std::exception& e) {
      return absl::ResourceExhaustedError(absl::StrCat("model ", model_.name, ": cannot allocate stream state for ",
                                                       step_.slots, " slots: ", FirstLine(e.what())));
    }
    for (int b : step_.batch_sizes) SLUICE_RETURN_IF_ERROR(LoadGraph(b, warmup_runs));
    return absl::OkStatus();
  }

  absl::StatusOr<StreamStepOutput> Step(const StreamStepInput& input) override {
    SLUICE_RETURN_IF_ERROR(Validate(input));
    SLUICE_RETURN_IF_ERROR(threads_.ApplyToCallingThread());
    try {
      return Run(graphs_.at(input.batch_size), input.batch_size, input.rows);
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(model_.name, " stream_step_b", input.batch_size, " on ", Describe(),
                                              " failed: ", FirstLine(e.what())));
    }
  }

  absl::StatusOr<std::vector<std::vector<float>>> SlotState(int slot) override {
    if (slot < 0 || slot > scratch_slot_) return absl::InvalidArgumentError(absl::StrCat("no slot ", slot));
    torch::InferenceMode inference_mode;
    std::vector<std::vector<float>> out;
    for (const torch::Tensor& state : states_) {
      torch::Tensor row = state[slot].to(torch::kCPU).contiguous();
      out.emplace_back(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
    }
    return out;
  }

  const StreamStepOptions& options() const override { return step_; }
  const std::vector<BucketLoadStats>& load_stats() const override { return stats_; }
  InstanceMemory memory() const override { return memory_; }
  std::string Describe() const override {
    return absl::StrCat(model_.name, "#", replica_, " stream_step on ", DeviceKindName(group_.device), " (",
                        step_.slots, " slots, chunk ", step_.chunk_samples, " samples, state ",
                        memory_.cache_bytes / 1024, " KiB)");
  }

 private:
  absl::Status Validate(const StreamStepInput& input) const {
    if (!graphs_.contains(input.batch_size)) {
      return absl::InvalidArgumentError(absl::StrCat(model_.name, ": no stream_step graph for batch size ",
                                                     input.batch_size));
    }
    if (input.rows.empty() || static_cast<int>(input.rows.size()) > input.batch_size) {
      return absl::InvalidArgumentError(absl::StrCat(model_.name, ": ", input.rows.size(),
                                                     " rows for stream batch size ", input.batch_size));
    }
    std::set<int> seen;
    for (const StreamStepRow& row : input.rows) {
      if (row.slot < 0 || row.slot >= step_.slots || !seen.insert(row.slot).second) {
        return absl::InvalidArgumentError(absl::StrCat(model_.name, ": stream slot ", row.slot,
                                                       " is out of range [0, ", step_.slots, ") or repeated"));
      }
      if (row.samples.empty() || static_cast<int64_t>(row.samples.size()) > step_.chunk_samples) {
        return absl::InvalidArgumentError(absl::StrCat(model_.name, ": a stream chunk holds 1..", step_.chunk_samples,
                                                       " samples, got ", row.samples.size()));
      }
    }
    return absl::OkStatus();
  }

  absl::Status LoadGraph(int batch_size, int warmup_runs) {
    const std::string path = StreamStepGraphPath(model_, batch_size);
    BucketLoadStats stats{batch_size, step_.chunk_samples, 0, 0, 0};
    const auto load_start = Clock::now();
    absl::StatusOr<torch::jit::Module> module = LoadTorchGraph(target_, path);
    if (!module.ok()) {
      return absl::Status(module.status().code(), absl::StrCat("model ", model_.name, ": cannot load graph ", path,
                                                               ": ", module.status().message()));
    }
    try {
      torch::jit::Module& graph = graphs_[batch_size] = std::move(*module);
      graph.eval();
      stats.load_seconds = SecondsSince(load_start);
      memory_.graph_bytes += GraphFileBytes(path);
      ++memory_.graphs;
      const auto warm_start = Clock::now();
      for (int i = 0; i < warmup_runs; ++i) {
        const auto run_start = Clock::now();
        Run(graph, batch_size, {});  // padding rows only: writes the scratch slot alone
        stats.steady_seconds = SecondsSince(run_start);
      }
      stats.warm_seconds = SecondsSince(warm_start);
    } catch (const std::exception& e) {
      return absl::FailedPreconditionError(absl::StrCat("model ", model_.name, ": cannot load and warm graph ", path,
                                                        ": ", FirstLine(e.what())));
    }
    stats_.push_back(stats);
    return absl::OkStatus();
  }

  StreamStepOutput Run(torch::jit::Module& graph, int batch_size, const std::vector<StreamStepRow>& rows) {
    torch::InferenceMode inference_mode;
    const int64_t chunk = step_.chunk_samples;
    torch::Tensor audio = torch::zeros({batch_size, chunk}, torch::kFloat32);
    torch::Tensor lengths = torch::zeros({batch_size}, torch::kInt64);
    torch::Tensor slots = torch::full({batch_size}, static_cast<int64_t>(scratch_slot_), torch::kInt64);
    torch::Tensor reset = torch::ones({batch_size}, torch::kInt64);
    float* a = audio.data_ptr<float>();
    for (size_t r = 0; r < rows.size(); ++r) {
      std::copy(rows[r].samples.begin(), rows[r].samples.end(), a + r * chunk);
      lengths.data_ptr<int64_t>()[r] = static_cast<int64_t>(rows[r].samples.size());
      slots.data_ptr<int64_t>()[r] = rows[r].slot;
      reset.data_ptr<int64_t>()[r] = rows[r].reset ? 1 : 0;
    }
    std::vector<torch::jit::IValue> args = {audio.to(device_), lengths.to(device_), slots.to(device_),
                                            reset.to(device_)};
    args.insert(args.end(), states_.begin(), states_.end());
    args.insert(args.end(), weights_->tensors.begin(), weights_->tensors.end());
    const torch::jit::IValue returned = graph.forward(args);
    if (!returned.isTensor()) throw std::runtime_error("stream_step must return one log-probs tensor");
    const torch::Tensor& out = returned.toTensor();
    if (out.scalar_type() != torch::kFloat32 || out.dim() != 3 || out.size(0) != batch_size ||
        out.size(1) != step_.frames_per_chunk || out.size(2) != classes_) {
      throw std::runtime_error(absl::StrCat("stream_step returned ", ShapeToString(out.sizes().vec()),
                                            ", expected Float [", batch_size, ", ", step_.frames_per_chunk, ", ",
                                            classes_, "]"));
    }
    torch::Tensor cpu = out.slice(0, 0, static_cast<int64_t>(rows.size())).to(torch::kCPU).contiguous();
    StreamStepOutput result{static_cast<int>(rows.size()), step_.frames_per_chunk, classes_, {}};
    result.values.assign(cpu.data_ptr<float>(), cpu.data_ptr<float>() + cpu.numel());
    return result;
  }

  const ModelConfig& model_;
  const StreamStepOptions step_;
  const InstanceGroup group_;
  const int replica_;
  const TorchTarget target_;
  const torch::Device device_;
  const InstanceThreads threads_;
  const int scratch_slot_;
  const int64_t classes_;
  std::shared_ptr<const TorchWeights> weights_;
  std::vector<torch::Tensor> states_;  // [slots + 1, shape...] each, in graph argument order
  std::map<int, torch::jit::Module> graphs_;  // by batch size
  InstanceMemory memory_;
  std::vector<BucketLoadStats> stats_;
};

}  // namespace

std::string StreamStepGraphPath(const ModelConfig& model, int batch_size) {
  return (std::filesystem::path(model.directory) / "graphs" / absl::StrCat("stream_step_b", batch_size, ".pt"))
      .string();
}

absl::StatusOr<std::unique_ptr<StreamStepBackend>> StreamStepBackend::Create(const InstanceOptions& options,
                                                                             const StreamStepOptions& step) {
  if (options.model == nullptr || !options.model->speech) {
    return absl::InvalidArgumentError("StreamStepBackend needs a speech model");
  }
  const DeviceKind device = options.group.device;
  if (device == DeviceKind::kSim ||
      (device == DeviceKind::kNeuron && options.group.neuron_runtime == NeuronRuntimeKind::kNrt)) {
    return absl::UnimplementedError(absl::StrCat("model ", options.model->name, ": stream_step graphs run on cpu, "
                                                 "cuda or neuron (TorchScript) instances only, not ",
                                                 DeviceKindName(device)));
  }
  SLUICE_ASSIGN_OR_RETURN(TorchTarget target, ChooseTorchTarget(options));
  SLUICE_ASSIGN_OR_RETURN(InstanceThreads threads, InstanceThreads::Create(options));
  auto backend = std::make_unique<TorchStreamStepBackend>(options, step, target, threads);
  SLUICE_RETURN_IF_ERROR(backend->LoadAll(options.warmup_runs));
  return backend;
}

}  // namespace sluice
