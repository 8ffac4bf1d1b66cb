#include "backend/base/blas_kernels.h"

#include <dlfcn.h>
#include <stdlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sluice {

CpuVectorUnits DetectCpuVectorUnits() {
  CpuVectorUnits units;
#if defined(__x86_64__)
  __builtin_cpu_init();
  units.avx2 = __builtin_cpu_supports("avx2");
  units.avx512f = __builtin_cpu_supports("avx512f");
#endif
  return units;
}

namespace {

LoadedBlasLibrary FindLoadedBlasLibrary() {
  LoadedBlasLibrary blas;
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (sgemm == nullptr || dladdr(sgemm, &where) == 0 || where.dli_fname == nullptr) return blas;
  char* resolved = realpath(where.dli_fname, nullptr);
  blas.file = resolved != nullptr ? resolved : where.dli_fname;
  free(resolved);
  // RTLD_NOLOAD: a reference to the library already loaded, never a new one.
  blas.handle = dlopen(where.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  return blas;
}

}  // namespace

void* LoadedBlasLibrary::Find(const char* name) const { return handle != nullptr ? dlsym(handle, name) : nullptr; }

const LoadedBlasLibrary& LoadedBlasLibraryOfProcess() {
  static const LoadedBlasLibrary* const blas = new LoadedBlasLibrary(FindLoadedBlasLibrary());
  return *blas;
}

std::string LoadedOpenBlasCore() {
  auto corename = reinterpret_cast<char* (*)()>(LoadedBlasLibraryOfProcess().Find("openblas_get_corename"));
  if (corename == nullptr) return "";
  const char* name = corename();
  return name != nullptr ? name : "";
}

std::optional<std::string> BlasKernelWarning(std::string_view openblas_core, CpuVectorUnits cpu) {
  if (!cpu.avx2) return std::nullopt;
  // OpenBLAS's x86 kernel sets that use neither AVX2 nor AVX-512 (its DYNAMIC_ARCH fallbacks for unknown models).
  static constexpr std::string_view kPreAvx2[] = {"prescott", "core2",     "penryn",    "dunnington",
                                                  "nehalem",  "atom",      "sandybridge", "barcelona",
                                                  "opteron",  "opteron_sse3", "katmai",  "coppermine",
                                                  "northwood", "banias",   "athlon"};
  const std::string core = absl::AsciiStrToLower(std::string(openblas_core));
  bool slow = false;
  for (std::string_view name : kPreAvx2) slow = slow || core == name;
  if (!slow) return std::nullopt;
  const char* better = cpu.avx512f ? "SkylakeX" : "Haswell";
  return absl::StrCat("OpenBLAS runs its ", std::string(openblas_core), " kernels on a CPU with ",
                      cpu.avx512f ? "AVX-512" : "AVX2",
                      " (it did not recognise the CPU model, as on some virtual machines): CPU graphs may run up to "
                      "2x slower. Set OPENBLAS_CORETYPE=", better,
                      " in the server's environment (deploy/README.md, \"CPU kernels\")");
}

}  // namespace sluice
