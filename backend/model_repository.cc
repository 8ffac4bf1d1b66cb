#include "backend/model_repository.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/neuron_runtime.h"
#include "backend/base/status_macros.h"

namespace sluice {
namespace fs = std::filesystem;

absl::StatusOr<std::vector<std::string>> ListModelDirectories(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository '", path, "' is not a directory"));
  }
  std::vector<std::string> dirs;
  for (const fs::directory_entry& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_directory() && fs::exists(entry.path() / "config.yaml")) dirs.push_back(entry.path().string());
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list '", path, "': ", ec.message()));
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

namespace {

// The Neuron runtime reads its visible cores once per process, so collect every neuron replica's slice up front.
std::vector<CoreRange> NeuronCoresOf(const std::vector<std::unique_ptr<ModelConfig>>& configs) {
  std::vector<CoreRange> ranges;
  for (const auto& config : configs) {
    for (const InstanceGroup& group : config->instances) {
      if (group.device == DeviceKind::kNeuron && group.cores) ranges.push_back(*group.cores);
    }
  }
  return ranges;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelRepository>> ModelRepository::Load(const RepositoryOptions& options) {
  SLUICE_ASSIGN_OR_RETURN(std::vector<std::string> dirs, ListModelDirectories(options.path));
  std::vector<std::unique_ptr<ModelConfig>> configs;
  for (const std::string& dir : dirs) {
    const std::string name = fs::path(dir).filename().string();
    const auto& only = options.only_models;
    if (!only.empty() && std::find(only.begin(), only.end(), name) == only.end()) continue;
    SLUICE_ASSIGN_OR_RETURN(ModelConfig config, LoadModelConfig(dir));
    configs.push_back(std::make_unique<ModelConfig>(std::move(config)));
  }
  if (configs.empty()) {
    return absl::NotFoundError(absl::StrCat("model repository '", options.path, "' holds no model",
                                            options.only_models.empty()
                                                ? " (expected <name>/config.yaml)"
                                                : absl::StrCat(" named ", absl::StrJoin(options.only_models, ", "))));
  }
  SLUICE_RETURN_IF_ERROR(ConfigureNeuronVisibleCores(NeuronCoresOf(configs)));

  auto repository = std::unique_ptr<ModelRepository>(new ModelRepository());
  for (auto& config : configs) {
    LoadedModel model;
    const auto start = std::chrono::steady_clock::now();
    SLUICE_ASSIGN_OR_RETURN(std::optional<StreamStepOptions> stream_step, LoadStreamStepOptions(*config));
    for (const InstanceGroup& group : config->instances) {
      for (int replica = 0; replica < group.count; ++replica) {
        const size_t replicas = std::max(model.instances.size(), model.generation_instances.size());
        if (options.cancel != nullptr && options.cancel->load()) {
          return absl::CancelledError(absl::StrCat("loading stopped before ", config->name, " instance ", replicas));
        }
        InstanceOptions instance{config.get(), group, static_cast<int>(replicas), options.warmup_runs,
                                 options.cancel};
        // neuron: this replica's NeuronCores; cpu: the CPUs its threads are pinned to.
        if (group.cores) instance.group.cores = ReplicaCores(*group.cores, group.count, replica);
        // An encoder-decoder speech model's replica is both: its encoder Backend and its decoder
        // GenerationBackend (one weights file, loaded once per device: torch_weights.h).
        if (config->kind != ModelKind::kGeneration) {
          SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, Backend::Create(instance));
          model.instances.push_back(std::move(backend));
          if (stream_step) {
            SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<StreamStepBackend> stream,
                                    StreamStepBackend::Create(instance, *stream_step));
            model.stream_instances.push_back(std::move(stream));
          }
        }
        if (config->generation) {
          SLUICE_ASSIGN_OR_RETURN(std::unique_ptr<GenerationBackend> backend, GenerationBackend::Create(instance));
          model.generation_instances.push_back(std::move(backend));
        }
      }
    }
    model.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    model.config = std::move(config);
    repository->models_.push_back(std::move(model));
  }
  return repository;
}

ModelMemory MemoryOf(const LoadedModel& model) {
  std::vector<InstanceMemory> instances;
  for (const auto& instance : model.instances) instances.push_back(instance->memory());
  for (const auto& instance : model.generation_instances) instances.push_back(instance->memory());
  for (const auto& instance : model.stream_instances) instances.push_back(instance->memory());
  return SumInstanceMemory(instances);
}

const LoadedModel* ModelRepository::Find(const std::string& name) const {
  for (const LoadedModel& model : models_) {
    if (model.config->name == name) return &model;
  }
  return nullptr;
}

}  // namespace sluice
