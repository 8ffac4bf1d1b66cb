// The Neuron Runtime library (libnrt) opened with dlopen, its entry points resolved with dlsym, and nrt_init /
// nrt_close bracketing its use: one NrtLibrary per process, shared by every instance that executes NEFFs.
// Errors from libnrt calls become absl::Status values naming the function and its NRT_STATUS (NrtCallError).
//
// Thread-safety: NrtLibrary::Acquire is safe to call concurrently (a process-wide mutex guards the shared handle;
// nothing else runs under it but dlopen/nrt_init). The resolved entry points are immutable; the Neuron Runtime
// documents its calls as thread-safe, and each sluice instance uses its own models and tensors.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backend/nrt/nrt_api.h"

namespace sluice {

// The entry points sluice uses, all non-null once resolved.
struct NrtFunctions {
  nrt_init_fn init = nullptr;
  nrt_close_fn close = nullptr;
  nrt_load_fn load = nullptr;
  nrt_unload_fn unload = nullptr;
  nrt_get_model_tensor_info_fn get_model_tensor_info = nullptr;
  nrt_free_model_tensor_info_fn free_model_tensor_info = nullptr;
  nrt_tensor_allocate_fn tensor_allocate = nullptr;
  nrt_tensor_free_fn tensor_free = nullptr;
  nrt_tensor_write_fn tensor_write = nullptr;
  nrt_tensor_read_fn tensor_read = nullptr;
  nrt_allocate_tensor_set_fn allocate_tensor_set = nullptr;
  nrt_destroy_tensor_set_fn destroy_tensor_set = nullptr;
  nrt_add_tensor_to_tensor_set_fn add_tensor_to_tensor_set = nullptr;
  nrt_execute_fn execute = nullptr;
};

class NrtLibrary {
 public:
  // The process's libnrt: on first use dlopen()s `path` (a file path or a soname searched the usual way),
  // resolves every entry point and calls nrt_init; later calls share it. nrt_close runs (and the library is
  // dlclose()d) when the last holder releases it. FailedPrecondition when the library or one of its symbols is
  // missing (naming which) or when a different path is already in use in this process; nrt_init's failure is
  // returned as NrtCallError("nrt_init", ...).
  static absl::StatusOr<std::shared_ptr<NrtLibrary>> Acquire(const std::string& path);

  NrtLibrary(const NrtLibrary&) = delete;
  NrtLibrary& operator=(const NrtLibrary&) = delete;
  ~NrtLibrary();

  const NrtFunctions& api() const { return api_; }
  const std::string& path() const { return path_; }

 private:
  NrtLibrary(std::string path, void* handle, NrtFunctions api) : path_(std::move(path)), handle_(handle), api_(api) {}

  std::string path_;
  void* handle_;
  NrtFunctions api_;
};

// "NRT_EXEC_BAD_INPUT (1002)"; unknown values as "NRT_STATUS 77".
std::string NrtStatusName(NRT_STATUS status);

// The error for a failed libnrt call: "<function> failed with <status name> (<context>)". The code follows the
// status: NRT_RESOURCE / NRT_LOAD_NOT_ENOUGH_NC ResourceExhausted, NRT_TIMEOUT DeadlineExceeded, NRT_HW_ERROR /
// NRT_EXEC_NC_BUSY / NRT_UNINITIALIZED / NRT_CLOSED Unavailable (the device is not usable), NRT_INVALID /
// NRT_EXEC_BAD_INPUT InvalidArgument, anything else Internal.
absl::Status NrtCallError(const char* function, NRT_STATUS status, const std::string& context);

}  // namespace sluice
