// The GEMM kernel for CPUs with AVX2 (built with -mavx2 and without FMA).
#include "backend_cpu/gemm_kernel.h"

#if !defined(__AVX2__) || defined(__AVX512F__)
#error "gemm_kernel_avx2.cc must be compiled with -mavx2 and without AVX-512 (see BUILD)"
#endif

namespace commir::cpu::gemm_internal {

// 6 rows x 2 vectors: 12 accumulators of the 16 ymm registers.
GemmKernel<float> Avx2KernelF32() { return MakeKernel<float, 8, 6, 2>(); }
GemmKernel<double> Avx2KernelF64() { return MakeKernel<double, 4, 6, 2>(); }

}  // namespace commir::cpu::gemm_internal
