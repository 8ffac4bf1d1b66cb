// Whether the process's BLAS runs kernels below what the CPU can do. OpenBLAS builds with DYNAMIC_ARCH (Debian's)
// choose their kernels from the CPU's family and model at load; a virtual machine that reports a generic model
// ("Intel(R) Xeon(R) Processor") gets the Prescott (SSE3) kernels on a CPU with AVX2 or AVX-512. On this project's
// VM that made asr_ctc_stream's 64-row stream step 1.5-2x slower than with OPENBLAS_CORETYPE=SkylakeX
// (loadtest/bench/results/streaming.md, 2026-12-06). The kernels are chosen when the library loads, before main:
// the fix is the environment variable, which the warning names.
// Thread-safety: pure functions, and a read of the loaded library's answer; safe from any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace sluice {

struct CpuVectorUnits {
  bool avx2 = false;
  bool avx512f = false;
};

// The running CPU's (x86-64; all false elsewhere).
CpuVectorUnits DetectCpuVectorUnits();

// The BLAS library serving the process's sgemm_ (the one libtorch's calls bind to), found at run time: dlsym/dladdr
// on what is already loaded, never a new load and no link dependency that could pick another BLAS. Looked up once.
struct LoadedBlasLibrary {
  std::string file;  // symlinks resolved; empty when no sgemm_ is in the process
  // A call of that library or its dependencies (Debian's libblas.so.3 wrapper finds libopenblas.so.0's calls
  // there); null when there is no such library or call.
  void* Find(const char* name) const;
  void* handle = nullptr;  // dlopen(RTLD_NOLOAD) of it; never closed
};
const LoadedBlasLibrary& LoadedBlasLibraryOfProcess();

// The kernel set OpenBLAS chose (its openblas_get_corename), or "" when the loaded BLAS is not OpenBLAS.
std::string LoadedOpenBlasCore();

// A warning naming the fix when `openblas_core` is one of OpenBLAS's pre-AVX2 x86 kernel sets and the CPU has
// AVX2 (OPENBLAS_CORETYPE=Haswell) or AVX-512 (=SkylakeX); nullopt otherwise (case-insensitive names).
std::optional<std::string> BlasKernelWarning(std::string_view openblas_core, CpuVectorUnits cpu);

}  // namespace sluice
