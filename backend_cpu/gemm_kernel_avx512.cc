// The GEMM kernel for CPUs with AVX-512F (built with -mavx512f and without FMA).
#include "backend_cpu/gemm_kernel.h"

#if !defined(__AVX512F__)
#error "gemm_kernel_avx512.cc must be compiled with -mavx512f (see BUILD)"
#endif

namespace commir::cpu::gemm_internal {

// 8 rows x 2 vectors: 16 accumulators of the 32 zmm registers.
GemmKernel<float> Avx512KernelF32() { return MakeKernel<float, 16, 8, 2>(); }
GemmKernel<double> Avx512KernelF64() { return MakeKernel<double, 8, 8, 2>(); }

}  // namespace commir::cpu::gemm_internal
