// The GEMM kernel for any x86-64 CPU (SSE2, 128-bit vectors).
#include "backend_cpu/gemm_kernel.h"

// Runs on every x86-64 CPU (BUILD adds -mno-avx, whatever -march a build uses).
#if defined(__AVX__)
#error "gemm_kernel_baseline.cc must be compiled for baseline x86-64 (see BUILD)"
#endif

namespace commir::cpu::gemm_internal {

// 6 rows x 2 vectors: 12 accumulators of the 16 xmm registers.
GemmKernel<float> BaselineKernelF32() { return MakeKernel<float, 4, 6, 2>(); }
GemmKernel<double> BaselineKernelF64() { return MakeKernel<double, 2, 6, 2>(); }

}  // namespace commir::cpu::gemm_internal
