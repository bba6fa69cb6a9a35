// The GEMM's register-blocked inner kernel, written once and compiled three times (one
// translation unit per instruction set: gemm_kernel_{baseline,avx2,avx512}.cc, each with
// its own -m flags and -ffp-contract=off). Everything here has internal linkage, so the
// three compilations never meet at link time.
//
// The kernel multiplies a packed panel of kRows rows of A by a packed panel of kCols
// columns of B over `depth` products. Each lane of each accumulator vector holds one
// element of C and adds its products one at a time, in p order, starting from +0: the
// sum's order is blas_gemm.h's, whatever the vector width, so the three builds give the
// same bits.
#ifndef COMMIR_BACKEND_CPU_GEMM_KERNEL_H_
#define COMMIR_BACKEND_CPU_GEMM_KERNEL_H_

#include <cstdint>

#include "backend_cpu/gemm_kernels.h"

namespace commir::cpu::gemm_internal {
namespace {

// kLanes elements of T per vector register; kRows x kVectors accumulators.
template <typename T, int kLanes, int kRows, int kVectors>
void MicroKernel(int64_t depth, const T* __restrict a_panel, const T* __restrict b_panel,
                 T* __restrict out) {
  typedef T Vec __attribute__((vector_size(sizeof(T) * kLanes)));
  constexpr int kCols = kLanes * kVectors;
  Vec acc[kRows][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) acc[r][v] = Vec{};
  }
  for (int64_t p = 0; p < depth; ++p) {
    // Packed panels are aligned to kPanelAlignment and kCols * sizeof(T) is a multiple
    // of the vector size, so these loads are aligned.
    const Vec* b = reinterpret_cast<const Vec*>(b_panel + p * kCols);
    Vec b_row[kVectors];
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) b_row[v] = b[v];
    const T* a = a_panel + p * kRows;
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const T a_value = a[r];
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] += a_value * b_row[v];
    }
  }
  Vec* out_vectors = reinterpret_cast<Vec*>(out);
#pragma GCC unroll 16
  for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) out_vectors[r * kVectors + v] = acc[r][v];
  }
}

template <typename T, int kLanes, int kRows, int kVectors>
constexpr GemmKernel<T> MakeKernel() {
  return GemmKernel<T>{kRows, kLanes * kVectors, &MicroKernel<T, kLanes, kRows, kVectors>};
}

}  // namespace
}  // namespace commir::cpu::gemm_internal

#endif  // COMMIR_BACKEND_CPU_GEMM_KERNEL_H_
