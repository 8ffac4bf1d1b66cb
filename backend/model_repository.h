// Loads a model repository: every subdirectory holding a config.yaml is a model; each model's instance groups
// are created (count replicas each) with every bucket graph loaded and warmed (for kind generation: GenerationBackends
// with every prefill and decode graph warmed and the KV cache allocated; a speech model with speech.stream_step
// also gets a StreamStepBackend per instance, its stream_step graphs warmed and its state slots allocated). Any error refuses the whole
// repository, so a server never starts half-configured.
// Thread-safety: immutable after Load(); the Backend instances themselves follow backend.h's contract.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/backend.h"
#include "backend/generation_backend.h"
#include "backend/stream_step_backend.h"
#include "backend/base/model_config.h"

namespace sluice {

struct LoadedModel {
  std::unique_ptr<ModelConfig> config;  // heap-held: instances keep a pointer to it
  std::vector<std::unique_ptr<Backend>> instances;  // empty for kind generation
  // kind generation, and the decoders of an encoder-decoder speech model (replica i beside instances[i])
  std::vector<std::unique_ptr<GenerationBackend>> generation_instances;
  // A speech model with speech.stream_step: one per instance as well, beside `instances` (same weights, bound once).
  std::vector<std::unique_ptr<StreamStepBackend>> stream_instances;
  double load_seconds = 0;  // wall time to create every instance (load + warm)
};

struct RepositoryOptions {
  std::string path;
  std::vector<std::string> only_models;  // empty: every model found
  int warmup_runs = 2;
  // May be null. Set (from another thread) to stop loading early: checked before each instance and passed to
  // each (InstanceOptions::cancel); Load() then returns Cancelled, and everything loaded so far is destroyed first
  // (the Neuron Runtime backend: its NEFFs unloaded, nrt_close when none is left).
  const std::atomic<bool>* cancel = nullptr;
};

class ModelRepository {
 public:
  static absl::StatusOr<std::unique_ptr<ModelRepository>> Load(const RepositoryOptions& options);

  ModelRepository(const ModelRepository&) = delete;
  ModelRepository& operator=(const ModelRepository&) = delete;

  const std::vector<LoadedModel>& models() const { return models_; }
  // nullptr when absent.
  const LoadedModel* Find(const std::string& name) const;
  std::vector<LoadedModel>& mutable_models() { return models_; }

 private:
  ModelRepository() = default;
  std::vector<LoadedModel> models_;
};

// What a loaded model holds over all its instances (backend.h SumInstanceMemory: shared weights counted once).
ModelMemory MemoryOf(const LoadedModel& model);

// The model directories (holding config.yaml) directly under `path`, sorted by name.
absl::StatusOr<std::vector<std::string>> ListModelDirectories(const std::string& path);

}  // namespace sluice
