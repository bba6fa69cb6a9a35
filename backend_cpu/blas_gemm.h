// Row-major general matrix multiply, overloaded on float and double so templated kernels
// can call one name. Reproducible: the result bits depend only on the operands, never on
// the thread count, the CPUs the process may use, the CPU model or the instruction set
// the kernel runs with.
//
// The bits are fixed by the summation order, which is part of this interface:
//   C[i, j] = alpha * S, where S adds the depth blocks' partial sums in order,
//   S = B_0 + B_1 + ... (left to right; S = B_0 when there is one block), and each block
//   B_b = ((0 + a[i, p0] * b[p0, j]) + a[i, p0+1] * b[p0+1, j]) + ... over its
//   kGemmDepthBlock consecutive p (the last block may be shorter),
// every product and sum rounded to T (no fused multiply-add). A kernel of any vector
// width computes each element in exactly this order: its lanes hold different elements
// of C, never parts of one sum. Accumulation is in T. A NaN result is always the default
// quiet NaN (x86 picks which input NaN a product keeps by operand order, which differs
// between the kernels' compilations).
#ifndef COMMIR_BACKEND_CPU_BLAS_GEMM_H_
#define COMMIR_BACKEND_CPU_BLAS_GEMM_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"

namespace commir::cpu {

// Consecutive products summed into one partial sum (see above). Two levels of summation
// keep the rounding error near that of blocked BLAS kernels for long contractions.
inline constexpr int64_t kGemmDepthBlock = 256;

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n], overwriting C. op(X) is X or X^T; A is
// stored as [m, k] (or [k, m] when transposed) with row stride lda, likewise B and C.
// Any of m, n, k may be 0 (k = 0 gives zeros, whatever alpha). C must not overlap A or B.
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float* c, int64_t ldc);
void Gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double* c, int64_t ldc);

// The instruction sets the kernel is built for. Gemm runs the best one the CPU supports;
// the environment variable COMMIR_GEMM_ISA=baseline|avx2|avx512 caps it, so a run can
// use the kernels an older machine would (the bits are the same; only speed changes).
enum class GemmIsa { kBaseline, kAvx2, kAvx512 };

absl::string_view GemmIsaName(GemmIsa isa);
// The levels this CPU (and operating system) can run, baseline first.
std::vector<GemmIsa> SupportedGemmIsas();
// The level Gemm uses in this process.
GemmIsa ActiveGemmIsa();

// Gemm with the kernel of one level (the baseline's where the CPU lacks `isa`). For tests
// and benchmarks that compare the levels.
void GemmWithIsa(GemmIsa isa, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                 int64_t k, float alpha, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc);
void GemmWithIsa(GemmIsa isa, bool transpose_a, bool transpose_b, int64_t m, int64_t n,
                 int64_t k, double alpha, const double* a, int64_t lda, const double* b,
                 int64_t ldb, double* c, int64_t ldc);

}  // namespace commir::cpu

#endif  // COMMIR_BACKEND_CPU_BLAS_GEMM_H_
