// Process-level preparation for the Neuron device: loading AWS's libtorchneuron.so (which registers the
// Neuron TorchScript operators) and choosing the NeuronCores the Neuron runtime may use.
// UNVERIFIED ON HARDWARE: no Trainium/Inferentia machine was reachable while this was written; everything up
// to the dlopen() and the environment variable is unit-tested, nothing past it has run.
// Thread-safety: all functions are safe to call concurrently.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/base/core_range.h"

namespace sluice {

inline constexpr char kNeuronVisibleCoresEnv[] = "NEURON_RT_VISIBLE_CORES";

// dlopen()s the library once per path (RTLD_NOW | RTLD_GLOBAL, so its operators register with libtorch).
// A missing or unloadable library is a FailedPrecondition naming the path and dlerror().
absl::Status LoadNeuronLibrary(const std::string& path);

// The slice of `group_cores` that replica `replica` of `count` owns (the group's cores split evenly).
// REQUIRES: group_cores.size() % count == 0 and 0 <= replica < count (config validation guarantees both).
CoreRange NeuronReplicaCores(const CoreRange& group_cores, int count, int replica);

// The NEURON_RT_VISIBLE_CORES value covering all `ranges` ("0-3", or "0-1,4-5" when not contiguous).
std::string NeuronVisibleCoresValue(std::vector<CoreRange> ranges);

// Sets NEURON_RT_VISIBLE_CORES for this process (the runtime reads it once, when it first starts), unless the
// operator already set it: then it must cover `ranges`, or this fails naming both values.
absl::Status ConfigureNeuronVisibleCores(const std::vector<CoreRange>& ranges);

}  // namespace sluice
