// A model instance that executes per-bucket NEFFs through the Neuron Runtime C API (device neuron, runtime nrt).
//
// Create() loads every bucket's NEFF onto the replica's NeuronCore with nrt_load, checks each NEFF's tensors
// (names, directions, byte sizes, dtypes, shapes as nrt_get_model_tensor_info reports them) against the manifest
// and config.yaml, allocates ONE device tensor per weight (written once from the manifest's safetensors file) and
// per cache, bound into every bucket's input set, and per bucket its own input/output tensors, once. Execute()
// writes the padded inputs and row lengths, runs nrt_execute and reads the outputs. Destruction frees every
// tensor, nrt_unload()s every NEFF, and releases the process's libnrt (nrt_close when it was the last user).
// Errors name the model, the bucket's NEFF, the tensor, and for libnrt calls the function and its NRT_STATUS.
// UNVERIFIED ON HARDWARE: exercised only against the fake libnrt in tests/backend.
//
// Thread-safety: as the Backend seam: Execute() from one thread at a time per instance.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backend/backend.h"

namespace sluice {

// REQUIRES: options.group.device is kNeuron with neuron_runtime kNrt, and cores set (config validation).
absl::StatusOr<std::unique_ptr<Backend>> CreateNrtBackend(const InstanceOptions& options);

}  // namespace sluice
