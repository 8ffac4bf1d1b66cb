// Backend::Create lives apart from backend.cc so that torch-free code (the scheduler and its tests) can link
// the seam and the sim device without libtorch.
#include "absl/strings/str_cat.h"
#include "backend/backend.h"
#include "backend/nrt/nrt_backend.h"
#include "backend/sim_backend.h"
#include "backend/torch_backend.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<Backend>> Backend::Create(const InstanceOptions& options) {
  if (options.model == nullptr) return absl::InvalidArgumentError("InstanceOptions.model is null");
  if (options.model->kind == ModelKind::kGeneration) {
    return absl::InvalidArgumentError(absl::StrCat("model ", options.model->name,
                                                   " is a generation model: its instances are GenerationBackends"));
  }
  if (options.group.device == DeviceKind::kSim) return CreateSimBackend(options);
  if (options.group.device == DeviceKind::kNeuron && options.group.neuron_runtime == NeuronRuntimeKind::kNrt) {
    return CreateNrtBackend(options);
  }
  return CreateTorchBackend(options);
}

}  // namespace sluice
