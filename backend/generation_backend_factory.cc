// GenerationBackend::Create lives apart from the sim implementation so that torch-free code (the engine and its
// tests) can link the sim device without libtorch.
#include "absl/strings/str_cat.h"
#include "backend/generation_backend.h"
#include "backend/nrt/nrt_generation_backend.h"
#include "backend/sim_generation_backend.h"
#include "backend/torch_generation_backend.h"

namespace sluice {

absl::StatusOr<std::unique_ptr<GenerationBackend>> GenerationBackend::Create(const InstanceOptions& options) {
  if (options.model == nullptr) return absl::InvalidArgumentError("InstanceOptions.model is null");
  if (!options.model->generation) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", options.model->name, " is not a generation model (kind: generation)"));
  }
  if (options.group.device == DeviceKind::kSim) return CreateSimGenerationBackend(options);
  if (options.group.device == DeviceKind::kNeuron && options.group.neuron_runtime == NeuronRuntimeKind::kNrt) {
    if (options.model->generation->cross_attention) {
      return absl::UnimplementedError(absl::StrCat("model ", options.model->name, ": an encoder-decoder decoder ",
                                                   "(cross_attention) is not built for runtime nrt; use torchscript"));
    }
    return CreateNrtGenerationBackend(options);
  }
  return CreateTorchGenerationBackend(options);
}

}  // namespace sluice
