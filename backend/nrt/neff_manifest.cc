#include "backend/nrt/neff_manifest.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
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

std::string Resolve(const std::string& model_dir, const std::string& relative) {
  return (std::filesystem::path(model_dir) / relative).lexically_normal().string();
}

absl::StatusOr<NeffTensorBinding> ParseBinding(const YamlNode& node, const ModelConfig& model,
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

absl::Status CheckBucketBindings(const YamlNode& at, const NeffBucket& bucket, const ModelConfig& model) {
  std::set<std::string> names;
  std::vector<int> inputs(model.inputs.size(), 0), outputs(model.outputs.size(), 0);
  int lengths = 0, output_lengths = 0;
  for (const NeffTensorBinding& b : bucket.tensors) {
    if (!names.insert(b.tensor).second) {
      return at.Error(absl::StrCat(bucket.neff, ": tensor '", b.tensor, "' is listed twice"));
    }
    if (b.role == NeffTensorRole::kInput) ++inputs[b.model_index];
    if (b.role == NeffTensorRole::kOutput) ++outputs[b.model_index];
    if (b.role == NeffTensorRole::kLengths) ++lengths;
    if (b.role == NeffTensorRole::kOutputLengths) ++output_lengths;
  }
  auto once = [&](const char* what, const std::string& name, int count) -> absl::Status {
    if (count == 1) return absl::OkStatus();
    return at.Error(absl::StrCat(bucket.neff, ": ", what, " '", name, "' is bound ", count,
                                 " times (exactly once needed)"));
  };
  for (size_t i = 0; i < inputs.size(); ++i) SLUICE_RETURN_IF_ERROR(once("input", model.inputs[i].name, inputs[i]));
  for (size_t i = 0; i < outputs.size(); ++i) {
    SLUICE_RETURN_IF_ERROR(once("output", model.outputs[i].name, outputs[i]));
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

absl::StatusOr<NeffBucket> ParseBucket(const YamlNode& node, const ModelConfig& model, bool has_weights_file) {
  SLUICE_RETURN_IF_ERROR(node.ExpectMap());
  SLUICE_RETURN_IF_ERROR(node.CheckKeys({"batch_size", "length", "neff", "tensors"}));
  NeffBucket bucket;
  SLUICE_ASSIGN_OR_RETURN(YamlNode batch, node.Required("batch_size"));
  SLUICE_ASSIGN_OR_RETURN(int64_t batch_size, batch.AsInt());
  bucket.batch_size = static_cast<int>(batch_size);
  SLUICE_ASSIGN_OR_RETURN(YamlNode length, node.Required("length"));
  SLUICE_ASSIGN_OR_RETURN(bucket.length, length.AsInt());
  const auto& sizes = model.buckets.batch_sizes;
  const auto& lengths = model.buckets.lengths;
  if (std::find(sizes.begin(), sizes.end(), batch_size) == sizes.end() ||
      std::find(lengths.begin(), lengths.end(), bucket.length) == lengths.end()) {
    return node.Error(absl::StrCat("bucket (", batch_size, ", ", bucket.length,
                                   ") is not a bucket of config.yaml (buckets.batch_sizes x buckets.lengths)"));
  }
  SLUICE_ASSIGN_OR_RETURN(YamlNode neff, node.Required("neff"));
  SLUICE_ASSIGN_OR_RETURN(std::string neff_path, neff.AsString());
  bucket.neff = Resolve(model.directory, neff_path);
  SLUICE_ASSIGN_OR_RETURN(YamlNode tensors, node.Required("tensors"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> items, tensors.AsSequence());
  for (const YamlNode& item : items) {
    SLUICE_ASSIGN_OR_RETURN(NeffTensorBinding binding, ParseBinding(item, model, bucket.neff, has_weights_file));
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

absl::StatusOr<NeffManifest> ParseNeffManifest(const YamlNode& root, const ModelConfig& model) {
  SLUICE_RETURN_IF_ERROR(root.ExpectMap());
  SLUICE_RETURN_IF_ERROR(root.CheckKeys({"version", "weights", "buckets"}));
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
  SLUICE_ASSIGN_OR_RETURN(YamlNode buckets, root.Required("buckets"));
  SLUICE_ASSIGN_OR_RETURN(std::vector<YamlNode> items, buckets.AsSequence());
  for (const YamlNode& item : items) {
    SLUICE_ASSIGN_OR_RETURN(NeffBucket bucket, ParseBucket(item, model, !manifest.weights_file.empty()));
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
