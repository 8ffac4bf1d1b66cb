// A generation model instance (GenerationBackend) that executes per-shape prefill and decode NEFFs through the
// Neuron Runtime C API (device neuron, runtime nrt).
//
// Create() loads every prefill and decode NEFF of the manifest onto the replica's NeuronCore (NeffInstance:
// weights once, and ONE K and ONE V cache tensor per replica, allocated and zeroed once, bound to every prefill and
// decode NEFF — as input, and as the output that aliases it, so each NEFF updates the cache in place on the
// device and decode reads what prefill wrote). Prefill()/Decode() write the padded tokens, lengths/positions and
// slots, nrt_execute, and read the logits; padding as torch_generation_backend.h (token 0, decode padding rows at
// position 0 of the scratch slot `slots`). Warm-up runs every NEFF writing only the scratch slot.
// UNVERIFIED ON HARDWARE: exercised only against the fake libnrt in tests/backend.
//
// Thread-safety: as generation_backend.h (one calling thread at a time per instance).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backend/generation_backend.h"

namespace sluice {

// REQUIRES: options.model->generation is set; options.group.device is kNeuron with neuron_runtime kNrt.
absl::StatusOr<std::unique_ptr<GenerationBackend>> CreateNrtGenerationBackend(const InstanceOptions& options);

}  // namespace sluice
