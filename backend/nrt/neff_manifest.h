// A NEFF model's manifest (<model dir>/neff_manifest.yaml, format in backend/compile/README.md "NEFF manifest"):
// for every (batch size, length) bucket of config.yaml — or, for a generation model, every prefill length and
// every (decode batch size, KV length) — the NEFF file and what each of its named tensors is to sluice: a model
// input, the per-row lengths, a weight (by name, from one safetensors file), a cache, an output, or the per-row
// output lengths. A cache may be bound twice in one NEFF, to an input and to an output: the NEFF updates it in
// place (in/out aliasing) and sluice binds the one device tensor to both. Parsing checks the manifest against the
// model config; checking it against the NEFFs themselves (names, sizes, dtypes the runtime reports) happens at
// load (neff_instance.cc).
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

// What a NEFF computes: one bucket of a batch model, or a generation model's prefill or decode graph.
enum class NeffGraph { kBucket, kPrefill, kDecode };
const char* NeffGraphName(NeffGraph graph);

// A generation NEFF's inputs and output, named as the TorchScript graphs' arguments (torch_generation_backend.h):
// prefill (tokens [1, L], length [1], slot [1]), decode (tokens [B], positions [B], slots [B]), all INT64; output
// logits FP32 [1 or B, vocab]; caches k_cache and v_cache, FP32 [layers, slots + 1, context_length, kv_heads,
// head_dim], each bound as an input and, when the NEFF writes it back (aliasing), as an output too.
const std::vector<std::string>& GenerationNeffInputs(NeffGraph graph);
inline constexpr char kGenerationLogits[] = "logits";
inline const std::vector<std::string> kGenerationCaches = {"k_cache", "v_cache"};

struct NeffTensorBinding {
  std::string tensor;  // the NEFF's tensor name (as nrt_get_model_tensor_info reports it)
  NeffTensorRole role = NeffTensorRole::kInput;
  // kInput / kOutput: the model input or output (config.yaml; generation: GenerationNeffInputs / "logits");
  // kWeight: the safetensors tensor; kCache: the cache's name (buckets naming the same cache share one device
  // tensor). Empty for kLengths / kOutputLengths.
  std::string name;
  // kInput / kOutput: index into the config's inputs / outputs (generation: into GenerationNeffInputs; 0 for
  // logits)
  int model_index = -1;
};

struct NeffBucket {
  NeffGraph graph = NeffGraph::kBucket;
  int batch_size = 0;  // kPrefill: 1
  int64_t length = 0;  // kDecode: the KV length
  std::string neff;  // absolute path
  std::vector<NeffTensorBinding> tensors;
};

struct NeffManifest {
  std::string path;          // for messages
  std::string weights_file;  // absolute path; empty when no tensor is a weight
  // Exactly one per bucket of the config, in the manifest's order; for a generation model the prefill NEFFs, then
  // the decode NEFFs, one per compiled shape.
  std::vector<NeffBucket> buckets;
};

// Reads <model.directory>/neff_manifest.yaml and checks it against `model`: version 1; exactly one entry per
// config bucket and no others; in each bucket, NEFF tensor names unique, every config input and output bound
// exactly once, at most one lengths tensor, one output_lengths tensor iff the model has a variable output,
// weights only with a `weights` file, each cache bound to at most one input and one output, an output cache also
// an input. A generation model's manifest has `prefill` and `decode` lists instead of `buckets`, each NEFF binding
// every GenerationNeffInputs name, logits and both caches as inputs, no lengths. Errors name the manifest's
// file:line, the NEFF and the tensor.
absl::StatusOr<NeffManifest> LoadNeffManifest(const ModelConfig& model);
absl::StatusOr<NeffManifest> ParseNeffManifest(const YamlNode& root, const ModelConfig& model);

}  // namespace sluice
