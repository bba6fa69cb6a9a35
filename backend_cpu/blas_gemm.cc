#include "backend_cpu/blas_gemm.h"

// Bit-reproducibility settings, before any Eigen header:
//  * no OpenMP threads inside Eigen (their count would change the blocking);
//  * every non-vector product through the blocked GEMM kernel, never the coefficient-
//    based "lazy" product Eigen picks for tiny sizes, whose vectorised dot products
//    start at the first aligned element and so depend on where the operands lie.
#define EIGEN_DONT_PARALLELIZE
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0

#include <sched.h>

#include <Eigen/Core>
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

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

// C is computed in tiles of at most kTileRows x kTileCols, each an independent Eigen
// product. The tiling depends only on m and n, so each element's summation order (and
// so its bits) is the same whether one thread computes every tile or many share them;
// threads only change which core computes a tile.
constexpr int64_t kTileRows = 128;
constexpr int64_t kTileCols = 1024;
// Below this many multiply-adds a product stays on the calling thread: starting threads
// would cost more than it saves.
constexpr int64_t kMinParallelMacs = int64_t{1} << 22;

// The CPUs this process may run on (taskset, cgroups), at least 1.
int UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

// One tile: C[rows, cols] = alpha * op(A)[rows, :] * op(B)[:, cols].
template <typename T>
void GemmTile(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha,
              const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  MatrixMap<T> c_matrix(c, m, n, Eigen::OuterStride<>(ldc));
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

template <typename T>
void EigenGemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha,
               const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    // Every entry is an empty sum; alpha is not applied, so a non-finite alpha does not
    // turn it into NaN.
    MatrixMap<T>(c, m, n, Eigen::OuterStride<>(ldc)).setZero();
    return;
  }
  PinCacheSizes();
  const int64_t row_tiles = (m + kTileRows - 1) / kTileRows;
  const int64_t col_tiles = (n + kTileCols - 1) / kTileCols;
  const int64_t tiles = row_tiles * col_tiles;
  auto run_tile = [&](int64_t tile) {
    const int64_t row = tile / col_tiles * kTileRows, col = tile % col_tiles * kTileCols;
    // Row `row` of op(A) and column `col` of op(B) in their stored layouts.
    const T* a_tile = transpose_a ? a + row : a + row * lda;
    const T* b_tile = transpose_b ? b + col * ldb : b + col;
    GemmTile(transpose_a, transpose_b, std::min(kTileRows, m - row), std::min(kTileCols, n - col),
             k, alpha, a_tile, lda, b_tile, ldb, c + row * ldc + col, ldc);
  };
  const bool large = m * n * k >= kMinParallelMacs;
  const int64_t workers = large ? std::min<int64_t>(tiles, UsableCpus()) : 1;
  std::atomic<int64_t> next{0};
  // The first exception of any worker (Eigen's packing buffers may throw bad_alloc); it
  // is rethrown on the calling thread once every helper has been joined, so the caller's
  // out-of-memory handling sees it instead of std::terminate.
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&] {
    try {
      for (int64_t tile; (tile = next.fetch_add(1)) < tiles;) run_tile(tile);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next.store(tiles);  // the others stop at their next tile
    }
  };
  std::vector<std::thread> helpers;
  for (int64_t i = 1; i < workers; ++i) {
    // Fewer threads give the same bits (the tiling does not depend on them), so a
    // thread that cannot be started (process limits) is simply not used.
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& helper : helpers) helper.join();
  if (failure) std::rethrow_exception(failure);
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
