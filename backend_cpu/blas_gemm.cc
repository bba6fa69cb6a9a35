#include "backend_cpu/blas_gemm.h"

// Bit-reproducibility settings, before any Eigen header:
//  * no OpenMP threads inside Eigen (their count would change the blocking);
//  * every non-vector product through the blocked GEMM kernel, never the coefficient-
//    based "lazy" product Eigen picks for tiny sizes, whose vectorised dot products
//    start at the first aligned element and so depend on where the operands lie.
#define EIGEN_DONT_PARALLELIZE
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <mutex>

namespace commir::cpu {
namespace {

// Eigen splits the contraction into blocks sized from the CPU's cache sizes, which it
// would query at run time: the summation order, hence the bits, would follow the CPU
// model. Fixed sizes (typical of current x86 cores) make the blocking a function of
// m, n and k only.
constexpr std::ptrdiff_t kL1Bytes = 32 * 1024;
constexpr std::ptrdiff_t kL2Bytes = 1024 * 1024;
constexpr std::ptrdiff_t kL3Bytes = 8 * 1024 * 1024;

void PinCacheSizes() {
  static std::once_flag once;
  std::call_once(once, [] { Eigen::setCpuCacheSizes(kL1Bytes, kL2Bytes, kL3Bytes); });
}

template <typename T>
using RowMajorMatrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <typename T>
using ConstMatrixMap = Eigen::Map<const RowMajorMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using MatrixMap = Eigen::Map<RowMajorMatrix<T>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename T>
void EigenGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha,
               const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  MatrixMap<T> c_matrix(c, m, n, Eigen::OuterStride<>(ldc));
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // Every entry is an empty sum; alpha is not applied, so a non-finite alpha does not
    // turn it into NaN.
    c_matrix.setZero();
    return;
  }
  PinCacheSizes();
  const ConstMatrixMap<T> a_stored(a, transpose_a ? k : m, transpose_a ? m : k,
                                   Eigen::OuterStride<>(lda));
  const ConstMatrixMap<T> b_stored(b, transpose_b ? n : k, transpose_b ? k : n,
                                   Eigen::OuterStride<>(ldb));
  // Four instantiations so that Eigen sees the storage order of each operand.
  if (transpose_a && transpose_b) {
    c_matrix.noalias() = alpha * a_stored.transpose() * b_stored.transpose();
  } else if (transpose_a) {
    c_matrix.noalias() = alpha * a_stored.transpose() * b_stored;
  } else if (transpose_b) {
    c_matrix.noalias() = alpha * a_stored * b_stored.transpose();
  } else {
    c_matrix.noalias() = alpha * a_stored * b_stored;
  }
}

}  // namespace

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc) {
  EigenGemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc) {
  EigenGemm(transpose_a, transpose_b, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

}  // namespace commir::cpu
