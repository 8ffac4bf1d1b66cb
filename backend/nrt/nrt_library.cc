#include "backend/nrt/nrt_library.h"

#include <dlfcn.h>

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "backend/base/sync.h"

namespace sluice {
namespace {

ABSL_CONST_INIT sluice::Mutex library_mu;
// Weak: the library closes when its last instance goes, so a process that unloads every NEFF model also
// releases the NeuronCores (nrt_close) rather than holding them until exit.
std::weak_ptr<NrtLibrary>& SharedLibrary() ABSL_EXCLUSIVE_LOCKS_REQUIRED(library_mu) {
  static auto* shared = new std::weak_ptr<NrtLibrary>();
  return *shared;
}

template <typename Fn>
absl::Status Resolve(void* handle, const std::string& path, const char* name, Fn* out) {
  dlerror();
  void* symbol = dlsym(handle, name);
  if (symbol == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " has no symbol ", name, ": it is not a Neuron Runtime libnrt (or one too old for sluice)"));
  }
  *out = reinterpret_cast<Fn>(symbol);
  return absl::OkStatus();
}

absl::StatusOr<NrtFunctions> ResolveAll(void* handle, const std::string& path) {
  NrtFunctions f;
  for (absl::Status s : {
           Resolve(handle, path, "nrt_init", &f.init),
           Resolve(handle, path, "nrt_close", &f.close),
           Resolve(handle, path, "nrt_load", &f.load),
           Resolve(handle, path, "nrt_unload", &f.unload),
           Resolve(handle, path, "nrt_get_model_tensor_info", &f.get_model_tensor_info),
           Resolve(handle, path, "nrt_free_model_tensor_info", &f.free_model_tensor_info),
           Resolve(handle, path, "nrt_tensor_allocate", &f.tensor_allocate),
           Resolve(handle, path, "nrt_tensor_free", &f.tensor_free),
           Resolve(handle, path, "nrt_tensor_write", &f.tensor_write),
           Resolve(handle, path, "nrt_tensor_read", &f.tensor_read),
           Resolve(handle, path, "nrt_allocate_tensor_set", &f.allocate_tensor_set),
           Resolve(handle, path, "nrt_destroy_tensor_set", &f.destroy_tensor_set),
           Resolve(handle, path, "nrt_add_tensor_to_tensor_set", &f.add_tensor_to_tensor_set),
           Resolve(handle, path, "nrt_execute", &f.execute),
       }) {
    if (!s.ok()) return s;
  }
  return f;
}

}  // namespace

absl::StatusOr<std::shared_ptr<NrtLibrary>> NrtLibrary::Acquire(const std::string& path) {
  sluice::MutexLock lock(&library_mu);
  if (std::shared_ptr<NrtLibrary> held = SharedLibrary().lock()) {
    if (held->path() != path) {
      return absl::FailedPreconditionError(absl::StrCat("the Neuron Runtime is already loaded from ", held->path(),
                                                        "; one libnrt per process, so neuron_library cannot be ",
                                                        path));
    }
    return held;
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load the Neuron Runtime library ", path, ": ", why ? why : "dlopen failed",
        ". Install the Neuron runtime (aws-neuronx-runtime-lib, which provides libnrt.so.1) or set "
        "instances[].neuron_library to its path"));
  }
  absl::StatusOr<NrtFunctions> api = ResolveAll(handle, path);
  if (!api.ok()) {
    dlclose(handle);
    return api.status();
  }
  if (NRT_STATUS status = api->init(NRT_FRAMEWORK_TYPE_NO_FW, "", ""); status != NRT_SUCCESS) {
    dlclose(handle);
    return NrtCallError("nrt_init", status, path);
  }
  std::shared_ptr<NrtLibrary> library(new NrtLibrary(path, handle, *api));
  SharedLibrary() = library;
  return library;
}

NrtLibrary::~NrtLibrary() {
  api_.close();
  dlclose(handle_);
}

std::string NrtStatusName(NRT_STATUS status) {
  const char* name = nullptr;
  switch (status) {
    case NRT_SUCCESS: name = "NRT_SUCCESS"; break;
    case NRT_FAILURE: name = "NRT_FAILURE"; break;
    case NRT_INVALID: name = "NRT_INVALID"; break;
    case NRT_INVALID_HANDLE: name = "NRT_INVALID_HANDLE"; break;
    case NRT_RESOURCE: name = "NRT_RESOURCE"; break;
    case NRT_TIMEOUT: name = "NRT_TIMEOUT"; break;
    case NRT_HW_ERROR: name = "NRT_HW_ERROR"; break;
    case NRT_QUEUE_FULL: name = "NRT_QUEUE_FULL"; break;
    case NRT_LOAD_NOT_ENOUGH_NC: name = "NRT_LOAD_NOT_ENOUGH_NC"; break;
    case NRT_UNSUPPORTED_NEFF_VERSION: name = "NRT_UNSUPPORTED_NEFF_VERSION"; break;
    case NRT_UNINITIALIZED: name = "NRT_UNINITIALIZED"; break;
    case NRT_CLOSED: name = "NRT_CLOSED"; break;
    case NRT_EXEC_BAD_INPUT: name = "NRT_EXEC_BAD_INPUT"; break;
    case NRT_EXEC_COMPLETED_WITH_NUM_ERR: name = "NRT_EXEC_COMPLETED_WITH_NUM_ERR"; break;
    case NRT_EXEC_COMPLETED_WITH_ERR: name = "NRT_EXEC_COMPLETED_WITH_ERR"; break;
    case NRT_EXEC_NC_BUSY: name = "NRT_EXEC_NC_BUSY"; break;
  }
  if (name == nullptr) return absl::StrCat("NRT_STATUS ", status);
  return absl::StrCat(name, " (", status, ")");
}

absl::Status NrtCallError(const char* function, NRT_STATUS status, const std::string& context) {
  std::string message = absl::StrCat(function, " failed with ", NrtStatusName(status), " (", context, ")");
  switch (status) {
    case NRT_RESOURCE:
    case NRT_LOAD_NOT_ENOUGH_NC: return absl::ResourceExhaustedError(message);
    case NRT_TIMEOUT: return absl::DeadlineExceededError(message);
    case NRT_HW_ERROR:
    case NRT_EXEC_NC_BUSY:
    case NRT_UNINITIALIZED:
    case NRT_CLOSED: return absl::UnavailableError(message);
    case NRT_INVALID:
    case NRT_EXEC_BAD_INPUT: return absl::InvalidArgumentError(message);
    default: return absl::InternalError(message);
  }
}

}  // namespace sluice
