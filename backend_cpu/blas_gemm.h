// Row-major general matrix multiply through OpenBLAS, overloaded on float and double so
// templated kernels can call one name.
#ifndef COMMIR_BACKEND_CPU_BLAS_GEMM_H_
#define COMMIR_BACKEND_CPU_BLAS_GEMM_H_

#include <cstdint>

namespace commir::cpu {

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n], overwriting C. op(X) is X or X^T; A is
// stored as [m, k] (or [k, m] when transposed) with row stride lda, likewise B and C.
// Any of m, n, k may be 0 (k = 0 gives zeros); each must fit OpenBLAS's 32-bit blasint,
// which any matrix that fits in memory with its partner does in practice.
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_BLAS_GEMM_H_
