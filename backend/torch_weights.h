// A model's weights bound once per device: graph format 2 (backend/compile/README.md "Graph format") stores every
// weight once, in <model>/weights.pt, and every graph takes them as trailing inputs. SharedTorchWeights loads that
// file once per (file, device) and hands every caller the same tensors while any of them holds them, so all bucket
// graphs of an instance and (device cpu, neuron: host tensors) all replicas in the process bind one copy.
// Included only by backend/*.cc: it carries libtorch headers.
//
// Thread-safety: SharedTorchWeights is safe to call concurrently. Its registry mutex is held across the load of a
// weights file (so two replicas never load one file twice); it is a leaf: nothing under it takes another lock.
// TorchWeights is immutable; graphs only read its tensors.
#pragma once

#include <torch/script.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"
#include "backend/torch_device.h"

namespace sluice {

inline constexpr int kGraphFormatVersion = 2;
inline constexpr char kWeightsFile[] = "weights.pt";

struct TorchWeights {
  std::string path;                   // <model>/weights.pt
  std::string id;                     // path and device: equal ids are one copy
  std::vector<torch::Tensor> tensors;  // in graph-input order
  int64_t bytes = 0;                  // sum of the tensors' nbytes
};

// The graph format of a model directory: 2 when it holds weights.pt, else 1 (every graph has its own weights).
int GraphFormatOf(const ModelConfig& model);

// Format 2: the model's weights on target.device, shared (see above). Errors (FailedPrecondition) name the file:
// unreadable, a format_version other than kGraphFormatVersion, a missing tensor.
// REQUIRES: GraphFormatOf(model) == 2.
absl::StatusOr<std::shared_ptr<const TorchWeights>> SharedTorchWeights(const ModelConfig& model,
                                                                       const TorchTarget& target);

// The size of a graph file (0 when it cannot be read; the load that follows reports why).
int64_t GraphFileBytes(const std::string& path);

}  // namespace sluice
