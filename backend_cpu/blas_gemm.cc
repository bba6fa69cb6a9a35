#include "backend_cpu/blas_gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cstdint>

namespace commir::cpu {
namespace {

CBLAS_TRANSPOSE ToCblas(bool transpose) { return transpose ? CblasTrans : CblasNoTrans; }

// BLAS wants leading dimensions of at least 1 even for empty matrices.
blasint LeadingDimension(int64_t ld) { return static_cast<blasint>(std::max<int64_t>(ld, 1)); }

template <typename T>
bool FillZerosIfEmpty(int64_t m, int64_t n, int64_t k, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return true;
  if (k != 0) return false;
  // An empty inner dimension: every entry is an empty sum. Not left to BLAS, which
  // would also apply alpha and so turn a non-finite alpha into NaN.
  for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, T{0});
  return true;
}

}  // namespace

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  if (FillZerosIfEmpty(m, n, k, c, ldc)) return;
  cblas_sgemm(CblasRowMajor, ToCblas(transpose_a), ToCblas(transpose_b), static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, LeadingDimension(lda), b,
              LeadingDimension(ldb), 0.0f, c, LeadingDimension(ldc));
}

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  if (FillZerosIfEmpty(m, n, k, c, ldc)) return;
  cblas_dgemm(CblasRowMajor, ToCblas(transpose_a), ToCblas(transpose_b), static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), alpha, a, LeadingDimension(lda), b,
              LeadingDimension(ldb), 0.0, c, LeadingDimension(ldc));
}

}  // namespace commir::cpu
