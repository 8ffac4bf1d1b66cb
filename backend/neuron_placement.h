// Placing each neuron replica's graphs on that replica's own NeuronCores (issue 18).
//
// A process owns every NeuronCore in NEURON_RT_VISIBLE_CORES, and the Neuron runtime loads each Neuron subgraph
// of a torch::jit::load()ed module to the least-used visible core unless told otherwise. sluice therefore loads
// every graph of replica r the way AWS's torch_neuronx.neuron_cores_context(start_nc, nc_count) does: through the
// TorchScript class torch.classes.neuron.Runtime that libtorchneuron.so registers, it sets the runtime's default
// placement to the replica's cores, loads, and puts the previous default back. start_nc counts from the first
// visible core (the runtime numbers the visible cores 0, 1, ... whatever their machine numbers); nc_count is the
// replica's core count (more cores than a graph needs replicate the graph over them; executions round-robin).
// Sources and what was and was not verified: README "Neuron core placement".
// UNVERIFIED ON HARDWARE: checked only against a fake torch.classes.neuron.Runtime (tests/backend).
//
// Thread-safety: NeuronPlacementWithinVisible is a pure function. WithNeuronCoreDefaults is safe to call
// concurrently: the default it sets is process-wide, so calls are serialized by a process-wide mutex held for the
// whole set-load-restore (AWS documents the Python context as not thread-safe); nothing else runs under it.
#pragma once

#include <string>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/base/core_range.h"

namespace sluice {

// torch_neuronx's (start_nc, nc_count), both relative to the process's visible NeuronCores.
struct NeuronCorePlacement {
  int start_nc = -1;
  int nc_count = -1;

  std::string ToString() const;  // "start_nc 2, nc_count 2"
  bool operator==(const NeuronCorePlacement&) const = default;
};

// The TorchScript class libtorchneuron.so registers (Python: torch.classes.neuron.Runtime).
inline constexpr char kNeuronRuntimeClass[] = "__torch__.torch.classes.neuron.Runtime";

// Where `cores` (machine NeuronCore numbers, as in the config's `cores`) lie among the visible cores `visible`
// (NEURON_RT_VISIBLE_CORES's value, e.g. "0-3" or "4,5-7"; empty: unset, so every core of the machine is visible,
// numbered from 0). FailedPrecondition when a core of `cores` is not visible; InvalidArgument for unparsable text.
absl::StatusOr<NeuronCorePlacement> NeuronPlacementWithinVisible(const CoreRange& cores, std::string_view visible);

// Runs `load` (which torch::jit::load()s graphs) with the Neuron runtime's default placement set to `placement`,
// then restores the previous default, also when `load` fails or throws. Fails before running `load` when
// `runtime_class` is not registered (libtorchneuron.so not loaded, or one without the placement API) or lacks one
// of get_default_start_nc, get_default_nc_count, get_visible_nc_count, set_default_neuron_cores (each error names
// what is missing), or when the placement reaches past the runtime's visible core count.
// `load`'s status is returned; a C++ exception from it is rethrown after restoring.
absl::Status WithNeuronCoreDefaults(const NeuronCorePlacement& placement, absl::FunctionRef<absl::Status()> load,
                                    const std::string& runtime_class = kNeuronRuntimeClass);

}  // namespace sluice
