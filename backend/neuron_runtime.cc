#include "backend/neuron_runtime.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace sluice {
namespace {

std::mutex& LibraryMutex() {
  static std::mutex mu;
  return mu;
}

// Expands "0-1,4" style text into core numbers; unparsable parts make the whole value invalid.
std::optional<std::set<int>> ExpandCores(const std::string& value) {
  std::set<int> cores;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    absl::StatusOr<CoreRange> range = ParseCoreRange(std::string_view(part.data(), part.size()));
    if (!range.ok()) return std::nullopt;
    for (int c = range->first; c <= range->last; ++c) cores.insert(c);
  }
  return cores;
}

}  // namespace

absl::Status LoadNeuronLibrary(const std::string& path) {
  std::lock_guard<std::mutex> lock(LibraryMutex());
  static std::set<std::string>* loaded = new std::set<std::string>();  // never freed: lives with the process
  if (loaded->count(path)) return absl::OkStatus();
  if (dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "device neuron needs AWS's libtorchneuron.so, but '", path, "' could not be loaded: ",
        why ? why : "unknown error",
        ". Install the Neuron SDK (torch-neuronx) and set instances[].neuron_library to its lib/libtorchneuron.so"));
  }
  loaded->insert(path);
  return absl::OkStatus();
}

CoreRange NeuronReplicaCores(const CoreRange& group_cores, int count, int replica) {
  return ReplicaCores(group_cores, count, replica);
}

std::string NeuronVisibleCoresValue(std::vector<CoreRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const CoreRange& a, const CoreRange& b) { return a.first < b.first; });
  std::vector<CoreRange> merged;
  for (const CoreRange& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
    } else {
      merged.push_back(r);
    }
  }
  return absl::StrJoin(merged, ",", [](std::string* out, const CoreRange& r) { out->append(r.ToString()); });
}

absl::Status ConfigureNeuronVisibleCores(const std::vector<CoreRange>& ranges) {
  if (ranges.empty()) return absl::OkStatus();
  const std::string wanted = NeuronVisibleCoresValue(ranges);
  if (const char* existing = std::getenv(kNeuronVisibleCoresEnv); existing != nullptr && *existing != '\0') {
    std::optional<std::set<int>> have = ExpandCores(existing);
    std::optional<std::set<int>> need = ExpandCores(wanted);
    if (!have || !std::includes(have->begin(), have->end(), need->begin(), need->end())) {
      return absl::FailedPreconditionError(absl::StrCat(kNeuronVisibleCoresEnv, "='", existing,
                                                        "' is set but the config's instances need cores ", wanted));
    }
    return absl::OkStatus();
  }
  // The runtime takes one contiguous range only (the Neuron runtime configuration guide: "3,5,6" is not valid).
  if (wanted.find(',') != std::string::npos) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the neuron instance groups' cores (", wanted, ") are not one contiguous range, which ",
        kNeuronVisibleCoresEnv, " must be for the Neuron runtime: give the groups adjacent cores, or set ",
        kNeuronVisibleCoresEnv, " to a contiguous range that covers them"));
  }
  if (setenv(kNeuronVisibleCoresEnv, wanted.c_str(), /*overwrite=*/1) != 0) {
    return absl::InternalError(absl::StrCat("cannot set ", kNeuronVisibleCoresEnv));
  }
  return absl::OkStatus();
}

}  // namespace sluice
