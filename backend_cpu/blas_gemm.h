// Row-major general matrix multiply, overloaded on float and double so templated kernels
// can call one name. Reproducible: the result bits depend only on the operands and the
// build, never on the thread count, the CPUs the process may use or the CPU model
// (Eigen with fixed cache blocking and the build's SIMD level, in fixed tiles of C that
// the usable CPUs share; see blas_gemm.cc). Accumulation is in T.
#ifndef COMMIR_BACKEND_CPU_BLAS_GEMM_H_
#define COMMIR_BACKEND_CPU_BLAS_GEMM_H_

#include <cstdint>

namespace commir::cpu {

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n], overwriting C. op(X) is X or X^T; A is
// stored as [m, k] (or [k, m] when transposed) with row stride lda, likewise B and C.
// Any of m, n, k may be 0 (k = 0 gives zeros, whatever alpha).
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_BLAS_GEMM_H_
