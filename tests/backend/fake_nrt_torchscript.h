// The fake libnrt's stand-in for a compiled NEFF of a real model: the bucket's TorchScript graph (graph format 2,
// weights as trailing inputs; backend/compile/README.md), run on the host by libtorch over the bytes of the tensors
// bound to the NEFF. This lets the tests serve the example models through the Neuron Runtime backend and compare
// its answers with the TorchScript path: every byte the backend writes (padded inputs, lengths, weights from
// safetensors, bound by the manifest's roles) reaches the graph, and every output byte it reads comes from it.
// Thread-safety: a loaded graph is run by one thread at a time (the fake's NEFF models are per core).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/nrt/nrt_api.h"

namespace sluice::testing {

// One tensor's bytes as the fake NEFF declares it.
struct FakeNeffBuffer {
  unsigned char* data = nullptr;
  size_t size = 0;
  nrt_dtype_t dtype = NRT_DTYPE_UNKNOWN;
  std::vector<uint32_t> shape;
};

class FakeTorchGraph {
 public:
  // Loads the TorchScript file (torch::jit::load); nullptr with *error set when it cannot be loaded.
  static std::unique_ptr<FakeTorchGraph> Load(const std::string& path, std::string* error);
  virtual ~FakeTorchGraph() = default;

  // Calls forward(args...) over the args' bytes (borrowed: in-place updates land there) and copies each element
  // of the returned tuple, or the one returned tensor, into `outputs` (same count, dtype and byte size, else
  // false with *error set).
  virtual bool Run(const std::vector<FakeNeffBuffer>& args, const std::vector<FakeNeffBuffer>& outputs,
                   std::string* error) = 0;
};

}  // namespace sluice::testing
