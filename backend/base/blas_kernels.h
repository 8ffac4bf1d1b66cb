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

// The kernel set OpenBLAS chose (openblas_get_corename, found at run time: no link dependency), or "" when no
// OpenBLAS is loaded.
std::string LoadedOpenBlasCore();

// A warning naming the fix when `openblas_core` is one of OpenBLAS's pre-AVX2 x86 kernel sets and the CPU has
// AVX2 (OPENBLAS_CORETYPE=Haswell) or AVX-512 (=SkylakeX); nullopt otherwise (case-insensitive names).
std::optional<std::string> BlasKernelWarning(std::string_view openblas_core, CpuVectorUnits cpu);

}  // namespace sluice
