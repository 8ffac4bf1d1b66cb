#include "backend/torch_weights.h"

#include <filesystem>
#include <map>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "backend/base/sync.h"

namespace sluice {
namespace {

// Live weight sets by id; entries expire with their last holder (the next caller loads the file again).
ABSL_CONST_INIT sluice::Mutex registry_mu;
std::map<std::string, std::weak_ptr<const TorchWeights>>& Registry() ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  static auto* registry = new std::map<std::string, std::weak_ptr<const TorchWeights>>();
  return *registry;
}

absl::StatusOr<std::shared_ptr<const TorchWeights>> LoadWeights(const std::string& path, const std::string& id,
                                                                const c10::Device& device) {
  auto weights = std::make_shared<TorchWeights>();
  weights->path = path;
  weights->id = id;
  try {
    torch::jit::Module module = torch::jit::load(path, device);
    if (!module.hasattr("format_version") || !module.hasattr("names")) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, ": not a weights file (no format_version or names; see backend/compile/README.md)"));
    }
    const int64_t version = module.attr("format_version").toInt();
    if (version != kGraphFormatVersion) {
      return absl::FailedPreconditionError(absl::StrCat(path, ": graph format ", version, ", this server reads format ",
                                                        kGraphFormatVersion, " (and format 1 without weights.pt)"));
    }
    const size_t count = module.attr("names").toListRef().size();
    for (size_t i = 0; i < count; ++i) {
      const std::string name = absl::StrCat("w", i);
      if (!module.hasattr(name)) {
        return absl::FailedPreconditionError(absl::StrCat(path, ": names lists ", count, " weights, ", name,
                                                          " is missing"));
      }
      torch::Tensor tensor = module.attr(name).toTensor();
      weights->bytes += static_cast<int64_t>(tensor.nbytes());
      weights->tensors.push_back(std::move(tensor));
    }
  } catch (const std::exception& e) {  // c10::Error derives from std::exception
    return absl::FailedPreconditionError(absl::StrCat("cannot load ", path, ": ", FirstLine(e.what())));
  }
  return std::shared_ptr<const TorchWeights>(std::move(weights));
}

}  // namespace

int GraphFormatOf(const ModelConfig& model) {
  std::error_code ec;
  return std::filesystem::exists(std::filesystem::path(model.directory) / kWeightsFile, ec) ? 2 : 1;
}

absl::StatusOr<std::shared_ptr<const TorchWeights>> SharedTorchWeights(const ModelConfig& model,
                                                                       const TorchTarget& target) {
  std::error_code ec;
  std::filesystem::path path = std::filesystem::path(model.directory) / kWeightsFile;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(path, ec);
  if (!ec) path = canonical;
  const std::string id = absl::StrCat(path.string(), " on ", target.device.str());
  // Held while loading: a second replica asking for the same file waits for the first copy instead of making its own.
  sluice::MutexLock lock(&registry_mu);
  auto& registry = Registry();
  if (auto it = registry.find(id); it != registry.end()) {
    if (std::shared_ptr<const TorchWeights> live = it->second.lock()) return live;
  }
  absl::StatusOr<std::shared_ptr<const TorchWeights>> loaded = LoadWeights(path.string(), id, target.device);
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(), absl::StrCat("model ", model.name, ": ", loaded.status().message()));
  }
  registry[id] = *loaded;
  return loaded;
}

int64_t GraphFileBytes(const std::string& path) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(size);
}

}  // namespace sluice
