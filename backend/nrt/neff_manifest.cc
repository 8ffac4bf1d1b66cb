#include "backend/nrt/neff_manifest.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend/base/status_macros.h"

namespace sluice {
namespace {

absl::StatusOr<NeffTensorRole> ParseRole(const YamlNode& node) {
  SLUICE_ASSIGN_OR_RETURN(std::string text, node.AsString());
  static const std::pair<const char*, NeffTensorRole> kRoles[] = {
      {"input", NeffTensorRole::kInput},   {"lengths", NeffTensorRole::kLengths},
      {"weight", NeffTensorRole::kWeight}, {"cache", NeffTensorRole::kCache},
      {"output", NeffTensorRole::kOutput}, {"output_lengths", NeffTensorRole::kOutputLengths}};
  for (const auto& [name, role] : kRoles) {
    if (text == name) return role;
  }
  return node.Error(absl::StrCat("unknown role '", text,
                                 "' (expected input, lengths, weight, cache, output or output_lengths)"));
}

int IndexOf(const std::vector<TensorSpec>& specs, const std::string& name) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int IndexOfName(const std::vector<std::string>& names, const std::string& name) {
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<int>(i);
  }
  return -1;
}

std::string Resolve(const std::string& model_dir, const std::string& relative) {
  return (std::filesystem::path(model_dir) / relative).lexically_normal().string();
}

absl::StatusOr<NeffTensorBinding> ParseBinding(const YamlNode& node, const ModelConfig& model, NeffGraph graph,
                                               const std::string& neff, bool has_weights_file) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"tensor", "role", "name"}));
  NeffTensorBinding binding;
  SLUICE_ASSIGN_OR_RETURN(YamlNode tensor, node.Required("tensor"));
  SLUICE_ASSIGN_OR_RETURN(binding.tensor, tensor.AsString());
  SLUICE_ASSIGN_OR_RETURN(YamlNode role, node.Required("role"));
  SLUICE_ASSIGN_OR_RETURN(binding.role, ParseRole(role));
  auto bad = [&](const YamlNode& at, const std::string& why) {
    return at.Error(absl::StrCat(neff, " tensor '", binding.tensor, "': ", why));
  };
  const bool named = binding.role != NeffTensorRole::kLengths && binding.role != NeffTensorRole::kOutputLengths;
  std::optional<YamlNode> name = node.Optional("name");
  if (!named) {
    if (name) return bad(*name, absl::StrCat("role ", NeffTensorRoleName(binding.role), " takes no name"));
    return binding;
  }
  if (!name) return bad(node, absl::StrCat("role ", NeffTensorRoleName(binding.role), " needs a name"));
  SLUICE_ASSIGN_OR_RETURN(binding.name, name->AsString());
  if (graph != NeffGraph::kBucket) {
    if (binding.role == NeffTensorRole::kLengths || binding.role == NeffTensorRole::kOutputLengths) {
      return bad(node, absl::StrCat("role ", NeffTensorRoleName(binding.role), " is not for generation NEFFs"));
    }
    const std::vector<std::string>& inputs = GenerationNeffInputs(graph);
    if (binding.role == NeffTensorRole::kInput) {
      binding.model_index = IndexOfName(inputs, binding.name);
      if (binding.model_index < 0) {
        return bad(*name, absl::StrCat("a ", NeffGraphName(graph), " NEFF's inputs are ", absl::StrJoin(inputs, ", "),
                                       ", not '", binding.name, "'"));
      }
    } else if (binding.role == NeffTensorRole::kOutput) {
      if (binding.name != kGenerationLogits) return bad(*name, "a generation NEFF's one output is logits");
      binding.model_index = 0;
    } else if (binding.role == NeffTensorRole::kCache && IndexOfName(kGenerationCaches, binding.name) < 0) {
      return bad(*name, absl::StrCat("a generation NEFF's caches are ", absl::StrJoin(kGenerationCaches, " and ")));
    } else if (binding.role == NeffTensorRole::kWeight && !has_weights_file) {
      return bad(*name, "is a weight, but the manifest names no weights file (top-level 'weights')");
    }
    return binding;
  }
  if (binding.role == NeffTensorRole::kInput) {
    binding.model_index = IndexOf(model.inputs, binding.name);
    if (binding.model_index < 0) return bad(*name, absl::StrCat("config.yaml declares no input '", binding.name, "'"));
  } else if (binding.role == NeffTensorRole::kOutput) {
    binding.model_index = IndexOf(model.outputs, binding.name);
    if (binding.model_index < 0) {
      return bad(*name, absl::StrCat("config.yaml declares no output '", binding.name, "'"));
    }
  } else if (binding.role == NeffTensorRole::kWeight && !has_weights_file) {
    return bad(*name, "is a weight, but the manifest names no weights file (top-level 'weights')");
  }
  return binding;
}

// A cache is bound at most twice in one NEFF: to an input and to the output that aliases it (the NEFF updates
// the buffer in place). Which binding is which is the NEFF's to say (nrt_get_model_tensor_info); the load checks
// that a cache bound to an output is also bound to an input (neff_instance.cc).
absl::Status CheckCacheBindings(const YamlNode& at, const NeffBucket& bucket) {
  std::map<std::string, int> count;
  for (const NeffTensorBinding& b : bucket.tensors) {
    if (b.role == NeffTensorRole::kCache && ++count[b.name] > 2) {
      return at.Error(absl::StrCat(bucket.neff, ": cache '", b.name, "' is bound ", count[b.name],
                                   " times (at most twice: one NEFF input and its aliased output)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckBucketBindings(const YamlNode& at, const NeffBucket& bucket, const ModelConfig& model) {
  std::set<std::string> names;
  const bool generation = bucket.graph != NeffGraph::kBucket;
  const std::vector<std::string> input_names = [&] {
    if (generation) return GenerationNeffInputs(bucket.graph);
    std::vector<std::string> v;
    for (const TensorSpec& spec : model.inputs) v.push_back(spec.name);
    return v;
  }();
  const std::vector<std::string> output_names = [&] {
    if (generation) return std::vector<std::string>{kGenerationLogits};
    std::vector<std::string> v;
    for (const TensorSpec& spec : model.outputs) v.push_back(spec.name);
    return v;
  }();
  std::vector<int> inputs(input_names.size(), 0), outputs(output_names.size(), 0);
  int lengths = 0, output_lengths = 0;
  std::set<std::string> caches;
  for (const NeffTensorBinding& b : bucket.tensors) {
    if (!names.insert(b.tensor).second) {
      return at.Error(absl::StrCat(bucket.neff, ": tensor '", b.tensor, "' is listed twice"));
    }
    if (b.role == NeffTensorRole::kInput) ++inputs[b.model_index];
    if (b.role == NeffTensorRole::kOutput) ++outputs[b.model_index];
    if (b.role == NeffTensorRole::kLengths) ++lengths;
    if (b.role == NeffTensorRole::kOutputLengths) ++output_lengths;
    if (b.role == NeffTensorRole::kCache) caches.insert(b.name);
  }
  auto once = [&](const char* what, const std::string& name, int count) -> absl::Status {
    if (count == 1) return absl::OkStatus();
    return at.Error(absl::StrCat(bucket.neff, ": ", what, " '", name, "' is bound ", count,
                                 " times (exactly once needed)"));
  };
  for (size_t i = 0; i < inputs.size(); ++i) SLUICE_RETURN_IF_ERROR(once("input", input_names[i], inputs[i]));
  for (size_t i = 0; i < outputs.size(); ++i) SLUICE_RETURN_IF_ERROR(once("output", output_names[i], outputs[i]));
  SLUICE_RETURN_IF_ERROR(CheckCacheBindings(at, bucket));
  if (generation) {
    for (const std::string& cache : kGenerationCaches) {
      if (!caches.count(cache)) {
        return at.Error(absl::StrCat(bucket.neff, ": cache '", cache, "' is not bound (the ", NeffGraphName(bucket.graph),
                                     " NEFF reads and writes the model's KV cache)"));
      }
    }
    return absl::OkStatus();
  }
  if (lengths > 1) return at.Error(absl::StrCat(bucket.neff, ": more than one lengths tensor"));
  if (output_lengths != (model.has_variable_output() ? 1 : 0)) {
    return at.Error(absl::StrCat(bucket.neff, model.has_variable_output()
                                                  ? ": the model has a variable-length output, so exactly one "
                                                    "output_lengths tensor is needed"
                                                  : ": output_lengths is only for models with a variable output"));
  }
  return absl::OkStatus();
}

template <typename T>
bool Contains(const std::vector<T>& values, int64_t value) {
  return std::find(values.begin(), values.end(), static_cast<T>(value)) != values.end();
}

// The shape keys of one entry: (batch_size, length) of a bucket, length of a prefill NEFF, (batch_size,
// kv_length) of a decode NEFF; each checked against config.yaml.
absl::Status ParseShape(const YamlNode& node, const ModelConfig& model, NeffBucket& bucket) {
  const char* length_key = bucket.graph == NeffGraph::kDecode ? "kv_length" : "length";
  if (bucket.graph == NeffGraph::kPrefill) {
    bucket.batch_size = 1;
  } else {
    SLUICE_ASSIGN_OR_RETURN(YamlNode batch, node.Required("batch_size"));
    SLUICE_ASSIGN_OR_RETURN(int64_t batch_size, batch.AsInt());
    bucket.batch_size = static_cast<int>(batch_size);
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode length, node.Required(length_key));
  SLUICE_ASSIGN_OR_RETURN(bucket.length, length.AsInt());
  switch (bucket.graph) {
    case NeffGraph::kBucket:
      if (!Contains(model.buckets.batch_sizes, bucket.batch_size) || !Contains(model.buckets.lengths, bucket.length)) {
        return node.Error(absl::StrCat("bucket (", bucket.batch_size, ", ", bucket.length,
                                       ") is not a bucket of config.yaml (buckets.batch_sizes x buckets.lengths)"));
      }
      break;
    case NeffGraph::kPrefill:
      if (!Contains(model.generation->prefill_lengths, bucket.length)) {
        return node.Error(absl::StrCat("prefill length ", bucket.length,
                                       " is not compiled in config.yaml (generation.prefill_lengths)"));
      }
      break;
    case NeffGraph::kDecode:
      if (!Contains(model.generation->decode_batch_sizes, bucket.batch_size) ||
          !Contains(model.generation->kv_lengths, bucket.length)) {
        return node.Error(absl::StrCat("decode (batch ", bucket.batch_size, ", KV length ", bucket.length,
                                       ") is not compiled in config.yaml (generation.decode_batch_sizes x "
                                       "generation.kv_lengths)"));
      }
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<NeffBucket> ParseBucket(const YamlNode& node, const ModelConfig& model, NeffGraph graph,
                                       bool has_weights_file) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  switch (graph) {
    case NeffGraph::kBucket: SLUICE_RETURN_IF_ERROR(node.CheckKeys({"batch_size", "length", "neff", "tensors"})); break;
    case NeffGraph::kPrefill: SLUICE_RETURN_IF_ERROR(node.CheckKeys({"length", "neff", "tensors"})); break;
    case NeffGraph::kDecode:
      SLUICE_RETURN_IF_ERROR(node.CheckKeys({"batch_size", "kv_length", "neff", "tensors"}));
      break;
  }
  NeffBucket bucket;
  bucket.graph = graph;
  SLUICE_RETURN_IF_ERROR(ParseShape(node, model, bucket));
  SLUICE_ASSIGN_OR_RETURN(YamlNode neff, node.Required("neff"));
  SLUICE_ASSIGN_OR_RETURN(std::string neff_path, neff.AsString());
  bucket.neff = Resolve(model.directory, neff_path);
  SLUICE_ASSIGN_OR_RETURN(YamlNode tensors, node.Required("tensors"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> items, tensors.AsSequence());
  for (const YamlNode& item : items) {
    SLUICE_ASSIGN_OR_RETURN(NeffTensorBinding binding,
                            ParseBinding(item, model, graph, bucket.neff, has_weights_file));
    bucket.tensors.push_back(std::move(binding));
  }
  SLUICE_RETURN_IF_ERROR(CheckBucketBindings(tensors, bucket, model));
  return bucket;
}

}  // namespace

const char* NeffTensorRoleName(NeffTensorRole role) {
  switch (role) {
    case NeffTensorRole::kInput: return "input";
    case NeffTensorRole::kLengths: return "lengths";
    case NeffTensorRole::kWeight: return "weight";
    case NeffTensorRole::kCache: return "cache";
    case NeffTensorRole::kOutput: return "output";
    case NeffTensorRole::kOutputLengths: return "output_lengths";
  }
  return "?";
}

const char* NeffGraphName(NeffGraph graph) {
  switch (graph) {
    case NeffGraph::kBucket: return "bucket";
    case NeffGraph::kPrefill: return "prefill";
    case NeffGraph::kDecode: return "decode";
  }
  return "?";
}

const std::vector<std::string>& GenerationNeffInputs(NeffGraph graph) {
  static const std::vector<std::string> kPrefill = {"tokens", "length", "slot"};
  static const std::vector<std::string> kDecode = {"tokens", "positions", "slots"};
  static const std::vector<std::string> kNone;
  return graph == NeffGraph::kPrefill ? kPrefill : graph == NeffGraph::kDecode ? kDecode : kNone;
}

namespace {

// A generation model's `prefill` and `decode` lists: one NEFF per compiled prefill length and per (decode batch
// size, KV length), no others.
absl::Status ParseGenerationNeffs(const YamlNode& root, const ModelConfig& model, NeffManifest& manifest) {
  const GenerationOptions& g = *model.generation;
  for (NeffGraph graph : {NeffGraph::kPrefill, NeffGraph::kDecode}) {
    SLUICE_ASSIGN_OR_RETURN(YamlNode list, root.Required(NeffGraphName(graph)));
    SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> items, list.AsSequence());
    const size_t first = manifest.buckets.size();
    for (const YamlNode& item : items) {
      SLUICE_ASSIGN_OR_RETURN(NeffBucket bucket, ParseBucket(item, model, graph, !manifest.weights_file.empty()));
      for (size_t i = first; i < manifest.buckets.size(); ++i) {
        if (manifest.buckets[i].batch_size == bucket.batch_size && manifest.buckets[i].length == bucket.length) {
          return item.Error(absl::StrCat(NeffGraphName(graph), " (", bucket.batch_size, ", ", bucket.length,
                                         ") is listed twice"));
        }
      }
      manifest.buckets.push_back(std::move(bucket));
    }
    const size_t want = graph == NeffGraph::kPrefill ? g.prefill_lengths.size()
                                                     : g.decode_batch_sizes.size() * g.kv_lengths.size();
    if (manifest.buckets.size() - first != want) {
      return list.Error(absl::StrCat(manifest.buckets.size() - first, " ", NeffGraphName(graph), " NEFFs, but ",
                                     "config.yaml compiles ", want, ": every one needs its NEFF"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NeffManifest> ParseNeffManifest(const YamlNode& root, const ModelConfig& model) {
  SLUICE_RETURN_IF_ERROR(root.ExpectMap());
  if (model.generation) {
    SLUICE_RETURN_IF_ERROR(root.CheckKeys({"version", "weights", "prefill", "decode"}));
  } else {
    SLUICE_RETURN_IF_ERROR(root.CheckKeys({"version", "weights", "buckets"}));
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode version_node, root.Required("version"));
  SLUICE_ASSIGN_OR_RETURN(int64_t version, version_node.AsInt());
  if (version != kNeffManifestVersion) {
    return version_node.Error(absl::StrCat("version ", version, " is not supported (this sluice reads version ",
                                           kNeffManifestVersion, ")"));
  }
  NeffManifest manifest;
  manifest.path = root.file();
  if (auto weights = root.Optional("weights")) {
    SLUICE_ASSIGN_OR_RETURN(std::string file, weights->AsString());
    manifest.weights_file = Resolve(model.directory, file);
  }
  if (model.generation) {
    SLUICE_RETURN_IF_ERROR(ParseGenerationNeffs(root, model, manifest));
    return manifest;
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode buckets, root.Required("buckets"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> items, buckets.AsSequence());
  for (const YamlNode& item : items) {
    SLUICE_ASSIGN_OR_RETURN(NeffBucket bucket,
                            ParseBucket(item, model, NeffGraph::kBucket, !manifest.weights_file.empty()));
    for (const NeffBucket& seen : manifest.buckets) {
      if (seen.batch_size == bucket.batch_size && seen.length == bucket.length) {
        return item.Error(absl::StrCat("bucket (", bucket.batch_size, ", ", bucket.length, ") is listed twice"));
      }
    }
    manifest.buckets.push_back(std::move(bucket));
  }
  for (int batch_size : model.buckets.batch_sizes) {
    for (int64_t length : model.buckets.lengths) {
      const bool found = std::any_of(manifest.buckets.begin(), manifest.buckets.end(), [&](const NeffBucket& b) {
        return b.batch_size == batch_size && b.length == length;
      });
      if (!found) {
        return buckets.Error(absl::StrCat("no NEFF for bucket (", batch_size, ", ", length,
                                          "): every bucket of config.yaml needs one"));
      }
    }
  }
  return manifest;
}

absl::StatusOr<NeffManifest> LoadNeffManifest(const ModelConfig& model) {
  const std::string path = (std::filesystem::path(model.directory) / kNeffManifestFile).string();
  if (!std::filesystem::exists(path)) {
    return absl::NotFoundError(absl::StrCat("model ", model.name, " runs on the Neuron Runtime (runtime: nrt) but ",
                                            path, " does not exist: compile it with backend/compile "
                                                  "(--target neuron-neff)"));
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode root, YamlNode::LoadFile(path));
  return ParseNeffManifest(root, model);
}

}  // namespace sluice
