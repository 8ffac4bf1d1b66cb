// BlasKernelWarning: which OpenBLAS kernel sets waste which CPUs, and the fix it names.
#include "backend/base/blas_kernels.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace sluice {
namespace {

using ::testing::HasSubstr;

TEST(BlasKernelsTest, PrescottKernelsOnAnAvx512CpuNameSkylakeX) {
  const std::optional<std::string> warning = BlasKernelWarning("Prescott", {.avx2 = true, .avx512f = true});
  ASSERT_TRUE(warning.has_value());
  EXPECT_THAT(*warning, HasSubstr("Prescott kernels"));
  EXPECT_THAT(*warning, HasSubstr("AVX-512"));
  EXPECT_THAT(*warning, HasSubstr("OPENBLAS_CORETYPE=SkylakeX"));
}

TEST(BlasKernelsTest, PreAvx2KernelsOnAnAvx2CpuNameHaswellWhateverTheCase) {
  for (const char* core : {"PRESCOTT", "Nehalem", "sandybridge", "Core2"}) {
    const std::optional<std::string> warning = BlasKernelWarning(core, {.avx2 = true, .avx512f = false});
    ASSERT_TRUE(warning.has_value()) << core;
    EXPECT_THAT(*warning, HasSubstr("OPENBLAS_CORETYPE=Haswell")) << core;
  }
}

TEST(BlasKernelsTest, NoWarningWhenTheKernelsFitTheCpuOrNoOpenBlasIsLoaded) {
  EXPECT_FALSE(BlasKernelWarning("SkylakeX", {.avx2 = true, .avx512f = true}));
  EXPECT_FALSE(BlasKernelWarning("Cooperlake", {.avx2 = true, .avx512f = true}));
  EXPECT_FALSE(BlasKernelWarning("Haswell", {.avx2 = true, .avx512f = true}));
  EXPECT_FALSE(BlasKernelWarning("Zen", {.avx2 = true, .avx512f = false}));
  EXPECT_FALSE(BlasKernelWarning("Prescott", {.avx2 = false, .avx512f = false}));  // an old CPU: the right kernels
  EXPECT_FALSE(BlasKernelWarning("", {.avx2 = true, .avx512f = true}));
}

TEST(BlasKernelsTest, WithoutOpenBlasInTheProcessTheCoreIsEmpty) {
  // config_tests links no BLAS: nothing answers openblas_get_corename.
  EXPECT_EQ(LoadedOpenBlasCore(), "");
}

}  // namespace
}  // namespace sluice
