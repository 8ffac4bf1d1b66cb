#include "backend/neuron_placement.h"

#include <torch/custom_class.h>
#include <torch/script.h>

#include <exception>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "backend/base/sync.h"
#include "backend/base/status_macros.h"

namespace sluice {
namespace {

// The runtime default is process-wide: one set-load-restore at a time.
ABSL_CONST_INIT sluice::Mutex placement_mu;

// The methods torch_neuronx's neuron_cores_context calls on the runtime object, in its order.
constexpr const char* kGetStart = "get_default_start_nc";
constexpr const char* kGetCount = "get_default_nc_count";
constexpr const char* kVisibleCount = "get_visible_nc_count";
constexpr const char* kSetDefault = "set_default_neuron_cores";

std::string FirstLineOf(const std::string& text) { return text.substr(0, text.find('\n')); }

// "torch.classes.neuron.Runtime", as Python code names the class.
std::string PythonName(const std::string& qualified) {
  return std::string(absl::StripPrefix(qualified, "__torch__."));
}

// One torch.classes.neuron.Runtime object, constructed as TorchScript's `torch.classes.neuron.Runtime()` is: an
// object of the class with its slots, then its __init__.
class NeuronRuntimeObject {
 public:
  static absl::StatusOr<NeuronRuntimeObject> Create(const std::string& qualified) {
    const std::string name = PythonName(qualified);
    c10::ClassTypePtr type = torch::getCustomClass(qualified);
    if (type == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no TorchScript class ", name, " is registered: the neuron_library loaded is not a libtorchneuron.so with "
          "torch-neuronx's core placement API (the class behind torch_neuronx.neuron_cores_context)"));
    }
    std::vector<std::string> missing;
    for (const char* method : {"__init__", kGetStart, kGetCount, kVisibleCount, kSetDefault}) {
      if (type->findMethod(method) == nullptr) missing.push_back(method);
    }
    if (!missing.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " has no method ", absl::StrJoin(missing, ", "),
          ": this libtorchneuron.so predates (or changed) the core placement API sluice uses; use a torch-neuronx "
          "whose torch_neuronx.neuron_cores_context works"));
    }
    NeuronRuntimeObject runtime(name, type, c10::ivalue::Object::create(type, type->numAttributes()));
    SLUICE_RETURN_IF_ERROR(runtime.Call("__init__", {}).status());
    return runtime;
  }

  absl::StatusOr<int64_t> CallInt(const char* method, std::vector<c10::IValue> args = {}) const {
    SLUICE_ASSIGN_OR_RETURN(c10::IValue value, Call(method, std::move(args)));
    if (!value.isInt()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name_, ".", method, "() returned ", value.tagKind(), ", not int"));
    }
    return value.toInt();
  }

  absl::StatusOr<c10::IValue> Call(const char* method, std::vector<c10::IValue> args) const {
    args.insert(args.begin(), c10::IValue(object_));
    try {
      return (*type_->findMethod(method))(std::move(args));
    } catch (const std::exception& e) {  // c10::Error: a wrong signature, or the Neuron runtime's own failure
      return absl::FailedPreconditionError(
          absl::StrCat(name_, ".", method, " failed: ", FirstLineOf(e.what())));
    }
  }

 private:
  NeuronRuntimeObject(std::string name, c10::ClassTypePtr type, c10::intrusive_ptr<c10::ivalue::Object> object)
      : name_(std::move(name)), type_(std::move(type)), object_(std::move(object)) {}

  std::string name_;
  c10::ClassTypePtr type_;
  c10::intrusive_ptr<c10::ivalue::Object> object_;
};

}  // namespace

std::string NeuronCorePlacement::ToString() const {
  return absl::StrCat("start_nc ", start_nc, ", nc_count ", nc_count);
}

absl::StatusOr<NeuronCorePlacement> NeuronPlacementWithinVisible(const CoreRange& cores,
                                                                 std::string_view visible_text) {
  if (visible_text.empty()) return NeuronCorePlacement{cores.first, cores.size()};
  const std::string visible(visible_text);  // this absl's string_view is its own type
  std::set<int> visible_cores;
  for (absl::string_view part : absl::StrSplit(visible, ',')) {
    absl::StatusOr<CoreRange> range = ParseCoreRange(std::string_view(part.data(), part.size()));
    if (!range.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read NEURON_RT_VISIBLE_CORES='", visible, "': ",
                                                     range.status().message()));
    }
    for (int c = range->first; c <= range->last; ++c) visible_cores.insert(c);
  }
  for (int c = cores.first; c <= cores.last; ++c) {
    if (!visible_cores.count(c)) {
      return absl::FailedPreconditionError(absl::StrCat("NeuronCore ", c, " of cores ", cores.ToString(),
                                                        " is not in NEURON_RT_VISIBLE_CORES='", visible, "'"));
    }
  }
  // The runtime numbers the visible cores from 0 in increasing order ("3,4" are 0 and 1).
  const int start = static_cast<int>(std::distance(visible_cores.begin(), visible_cores.find(cores.first)));
  return NeuronCorePlacement{start, cores.size()};
}

absl::Status WithNeuronCoreDefaults(const NeuronCorePlacement& placement, absl::FunctionRef<absl::Status()> load,
                                    const std::string& runtime_class) {
  sluice::MutexLock lock(&placement_mu);
  const std::string where = absl::StrCat("Neuron core placement (", placement.ToString(), ")");
  auto failed = [&where](const absl::Status& status) {
    return absl::Status(status.code(), absl::StrCat(where, ": ", status.message()));
  };
  absl::StatusOr<NeuronRuntimeObject> runtime = NeuronRuntimeObject::Create(runtime_class);
  if (!runtime.ok()) return failed(runtime.status());
  absl::StatusOr<int64_t> old_start = runtime->CallInt(kGetStart);
  if (!old_start.ok()) return failed(old_start.status());
  absl::StatusOr<int64_t> old_count = runtime->CallInt(kGetCount);
  if (!old_count.ok()) return failed(old_count.status());
  // What torch_neuronx checks before placing (its _validate_nc_count), and the start as well: it initializes the
  // runtime, so a machine without visible NeuronCores fails here, before any graph loads.
  absl::StatusOr<int64_t> visible = runtime->CallInt(kVisibleCount);
  if (!visible.ok()) return failed(visible.status());
  if (placement.start_nc < 0 || placement.nc_count < 1 || placement.start_nc + placement.nc_count > *visible) {
    return absl::FailedPreconditionError(absl::StrCat(where, ": the Neuron runtime sees ", *visible,
                                                      " NeuronCores (numbered from 0)"));
  }
  absl::StatusOr<c10::IValue> set = runtime->Call(
      kSetDefault, {c10::IValue(int64_t{placement.start_nc}), c10::IValue(int64_t{placement.nc_count})});
  if (!set.ok()) return failed(set.status());
  auto restore = [&]() { return runtime->Call(kSetDefault, {c10::IValue(*old_start), c10::IValue(*old_count)}); };
  absl::Status loaded;
  try {
    loaded = load();
  } catch (...) {
    (void)restore();
    throw;
  }
  absl::StatusOr<c10::IValue> restored = restore();
  if (loaded.ok() && !restored.ok()) return failed(restored.status());
  return loaded;
}

}  // namespace sluice
