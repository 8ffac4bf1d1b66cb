#include "backend/torch_device.h"

#include <torch/cuda.h>

#include "absl/strings/str_cat.h"
#include "backend/base/status_macros.h"
#include "backend/neuron_runtime.h"

namespace sluice {

absl::StatusOr<c10::Device> ChooseTorchDevice(const InstanceOptions& options) {
  switch (options.group.device) {
    case DeviceKind::kCpu:
      return c10::Device(c10::kCPU);
    case DeviceKind::kCuda:
      if (!torch::cuda::is_available()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "model ", options.model->name, ": device cuda requested, but this libtorch has no usable CUDA (",
            torch::cuda::device_count(), " devices visible; Debian's libtorch is CPU-only)"));
      }
      return c10::Device(c10::kCUDA, 0);
    case DeviceKind::kNeuron: {
      // Neuron graphs take host tensors; the Neuron runtime moves them to the NeuronCores itself.
      SLUICE_RETURN_IF_ERROR(LoadNeuronLibrary(options.group.neuron_library));
      return c10::Device(c10::kCPU);
    }
    case DeviceKind::kSim:
      break;
  }
  return absl::InvalidArgumentError("the torch backend does not run device sim");
}

}  // namespace sluice
