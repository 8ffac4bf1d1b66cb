// libtorch TorchScript backend for devices cpu, cuda and neuron (Neuron graphs are TorchScript too, traced by
// torch_neuronx.trace; they run once AWS's libtorchneuron.so is loaded into the process).
// This header is torch-free on purpose: libtorch headers stay inside torch_backend.cc.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backend/backend.h"

namespace sluice {

// REQUIRES: options.group.device is cpu, cuda or neuron.
absl::StatusOr<std::unique_ptr<Backend>> CreateTorchBackend(const InstanceOptions& options);

}  // namespace sluice
