// The fake libnrt's test controls (fake_libnrt.cc "Test controls"), resolved with dlsym from the same library the
// backend dlopen()s: one handle, so the tests read and steer the very state the backend's calls change.
// Thread-safety: the controls take the fake's mutex; a FakeNrt is set up once and then only read.
#pragma once

#include <dlfcn.h>

namespace sluice::testing {

struct FakeNrt {
  void* handle = nullptr;
  void (*reset)() = nullptr;
  void (*fail_next)(const char*, int) = nullptr;
  // "init", "close", "execute", "loads", "unloads", "live_models", "live_tensors", "live_sets",
  // "device_allocations", "host_allocations"; -1 for anything else.
  int (*counter)(const char*) = nullptr;
  int (*allocations_named)(const char*) = nullptr;  // device or host tensors allocated with a name prefix
  int (*load_arg)(int, int) = nullptr;             // the i-th nrt_load's vnc (0) or vnc_count (1)

  explicit FakeNrt(const char* path) {
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return;
    reset = reinterpret_cast<void (*)()>(dlsym(handle, "fake_nrt_reset"));
    fail_next = reinterpret_cast<void (*)(const char*, int)>(dlsym(handle, "fake_nrt_fail_next"));
    counter = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "fake_nrt_counter"));
    allocations_named = reinterpret_cast<int (*)(const char*)>(dlsym(handle, "fake_nrt_allocations_named"));
    load_arg = reinterpret_cast<int (*)(int, int)>(dlsym(handle, "fake_nrt_load_arg"));
  }
};

}  // namespace sluice::testing
