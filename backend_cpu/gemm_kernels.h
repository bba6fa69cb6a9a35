// The GEMM's inner kernels, one per instruction set, for blas_gemm.cc. Internal to the
// cpu backend.
#ifndef COMMIR_BACKEND_CPU_GEMM_KERNELS_H_
#define COMMIR_BACKEND_CPU_GEMM_KERNELS_H_

#include <cstdint>

namespace commir::cpu::gemm_internal {

// Packed panels start at this alignment (one AVX-512 register).
inline constexpr int64_t kPanelAlignment = 64;

// out[rows][cols] = packed A panel [depth][rows] times packed B panel [depth][cols], each
// element summed in p order from +0 (blas_gemm.h). `out` is aligned like the panels.
template <typename T>
struct GemmKernel {
  int rows = 0;
  int cols = 0;
  void (*run)(int64_t depth, const T* a_panel, const T* b_panel, T* out) = nullptr;
};

// x86-64 without extensions (SSE2: 128-bit vectors).
GemmKernel<float> BaselineKernelF32();
GemmKernel<double> BaselineKernelF64();
// AVX2 (256-bit vectors; no FMA, so the sums round as in the baseline kernel).
GemmKernel<float> Avx2KernelF32();
GemmKernel<double> Avx2KernelF64();
// AVX-512F (512-bit vectors; no FMA).
GemmKernel<float> Avx512KernelF32();
GemmKernel<double> Avx512KernelF64();

}  // namespace commir::cpu::gemm_internal

#endif  // COMMIR_BACKEND_CPU_GEMM_KERNELS_H_
