// What the libtorch backends (torch_backend.cc: bucket graphs; torch_generation_backend.cc: prefill/decode
// graphs) share about devices: the torch::Device of an instance group (loading AWS's libtorchneuron.so first for
// device neuron; NEURON_RT_VISIBLE_CORES is set once per process by ModelRepository::Load), and the per-thread
// intra-op thread count. Included only by backend/*.cc: it carries libtorch headers.
// Thread-safety: ChooseTorchDevice is safe to call concurrently; UseIntraOpThreads affects the calling thread.
#pragma once

#include <ATen/Parallel.h>
#include <c10/core/Device.h>

#include <string>

#include "absl/status/statusor.h"
#include "backend/backend.h"

namespace sluice {

// cpu: the CPU; cuda: GPU 0 (FailedPrecondition when this libtorch has no usable CUDA); neuron: the CPU, after
// loading options.group.neuron_library (Neuron graphs take host tensors; the Neuron runtime moves them).
// InvalidArgument for device sim.
absl::StatusOr<c10::Device> ChooseTorchDevice(const InstanceOptions& options);

// libtorch's intra-op pool size is per calling thread (OpenMP): call it on whichever thread runs graphs.
inline void UseIntraOpThreads(int threads) { at::set_num_threads(threads); }

// The first line of a (multi-line) libtorch exception message.
inline std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace sluice
