// A NEFF model's manifest (<model dir>/neff_manifest.yaml, format in backend/compile/README.md "NEFF manifest"):
// for every (batch size, length) bucket of config.yaml, the NEFF file and what each of its named tensors is to
// sluice: a model input, the per-row lengths, a weight (by name, from one safetensors file), a cache, an output,
// or the per-row output lengths. Parsing checks the manifest against the model config; checking it against the
// NEFFs themselves (names, sizes, dtypes the runtime reports) happens at load (nrt_backend.cc).
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend/base/model_config.h"
#include "backend/base/yaml_node.h"

namespace sluice {

inline constexpr char kNeffManifestFile[] = "neff_manifest.yaml";
inline constexpr int kNeffManifestVersion = 1;

enum class NeffTensorRole { kInput, kLengths, kWeight, kCache, kOutput, kOutputLengths };
const char* NeffTensorRoleName(NeffTensorRole role);

struct NeffTensorBinding {
  std::string tensor;  // the NEFF's tensor name (as nrt_get_model_tensor_info reports it)
  NeffTensorRole role = NeffTensorRole::kInput;
  // kInput / kOutput: the model input or output (config.yaml); kWeight: the safetensors tensor; kCache: the
  // cache's name (buckets naming the same cache share one device tensor). Empty for kLengths / kOutputLengths.
  std::string name;
  int model_index = -1;  // kInput / kOutput: index into the config's inputs / outputs
};

struct NeffBucket {
  int batch_size = 0;
  int64_t length = 0;
  std::string neff;  // absolute path
  std::vector<NeffTensorBinding> tensors;
};

struct NeffManifest {
  std::string path;          // for messages
  std::string weights_file;  // absolute path; empty when no tensor is a weight
  std::vector<NeffBucket> buckets;  // exactly one per bucket of the config, in the manifest's order
};

// Reads <model.directory>/neff_manifest.yaml and checks it against `model`: version 1; exactly one entry per
// config bucket and no others; in each bucket, NEFF tensor names unique, every config input and output bound
// exactly once, at most one lengths tensor, one output_lengths tensor iff the model has a variable output,
// weights only with a `weights` file. Errors name the manifest's file:line, the NEFF and the tensor.
absl::StatusOr<NeffManifest> LoadNeffManifest(const ModelConfig& model);
absl::StatusOr<NeffManifest> ParseNeffManifest(const YamlNode& root, const ModelConfig& model);

}  // namespace sluice
