// Elementwise device kernels: unary, binary with broadcasting, convert, fill, and the
// two-buffer combine used by same-GPU collectives.
//
// Numerics match backend_cpu/kernels.h exactly in what they compute: f16/bf16/f32 compute
// in f32 (f64 in f64) and round to nearest even once on store; integers compute in i64
// with two's-complement wraparound; i1 stores any nonzero result as 1. Transcendentals use
// CUDA's libdevice functions (a few ulp from the host libm, never fast-math).
//
// Every function enqueues work on `stream` and returns immediately; the returned error is
// the launch error (cudaErrorInvalidValue for unsupported dtype/op/rank combinations).
// Element counts of 0 enqueue nothing and succeed.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_ELEMENTWISE_H_
#define COMMIR_BACKEND_CUDA_KERNELS_ELEMENTWISE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend_cuda/kernels/dtype.h"
#include "commir/elementwise_fn.h"

namespace commir::cuda_kernels {

// y[i] = op(x[i]) for n elements of `dtype`, op a one-operand function. neg, abs and relu
// accept integer types (i64, i32, i1); the rest need a float type. y may alias x.
cudaError_t LaunchUnary(ElementwiseFn op, KDType dtype, const void* x, void* y, int64_t n,
                        cudaStream_t stream);

// out = op(a, b), op a two-operand function, with NumPy broadcasting: a_shape and b_shape are right-aligned against
// out_shape (either may have lower rank, including 0-d) and each of their extents is 1 or
// equal to out's. All three share `dtype`. Floats follow IEEE (max/min propagate NaN).
// Integers: div is floor division; div by zero and pow with a negative exponent write 0
// and raise kErrIntDivByZero / kErrIntNegativePow in *error_flag when it is non-null.
// out may alias an operand whose shape equals out_shape.
cudaError_t LaunchBinary(ElementwiseFn op, KDType dtype, const void* a,
                         std::span<const int64_t> a_shape, const void* b,
                         std::span<const int64_t> b_shape, void* out,
                         std::span<const int64_t> out_shape, int32_t* error_flag,
                         cudaStream_t stream);

// out = cmp(a, b) as i1 (0 or 1) with LaunchBinary's broadcasting, for the predicate
// functions (ElementwiseFnIsPredicate: compare's eq ... ge): a and b hold `dtype`, out one
// byte per element. Compared exactly in the compute type, as on the host (NaN unequal).
cudaError_t LaunchCompare(ElementwiseFn op, KDType dtype, const void* a,
                          std::span<const int64_t> a_shape, const void* b,
                          std::span<const int64_t> b_shape, void* out,
                          std::span<const int64_t> out_shape, cudaStream_t stream);

// out = cond ? a : b (select) with NumPy broadcasting of all three: cond holds i1 bytes,
// a, b and out hold `dtype`. Elements are copied, never converted.
cudaError_t LaunchSelect(KDType dtype, const void* cond, std::span<const int64_t> cond_shape,
                         const void* a, std::span<const int64_t> a_shape, const void* b,
                         std::span<const int64_t> b_shape, void* out,
                         std::span<const int64_t> out_shape, cudaStream_t stream);

// y[i] = convert(x[i]) for n elements, as backend_cpu Convert: float targets round to
// nearest even (overflow -> +-inf); float -> integer rounds to nearest, ties to even,
// saturating, NaN -> 0; integer -> narrower integer wraps; anything -> i1 is x != 0.
// x and y must not overlap unless from == to.
cudaError_t LaunchConvert(KDType from, const void* x, KDType to, void* y, int64_t n,
                          cudaStream_t stream);

// y[0..n) = value rounded to dtype exactly as backend_cpu Full does.
cudaError_t LaunchFill(KDType dtype, void* y, int64_t n, double value, cudaStream_t stream);

enum class KCombineOp { kSum, kMax, kMin };

// The type an accumulator buffer of `dtype` data has: f32 for f16/bf16, dtype otherwise.
constexpr KDType KAccumType(KDType dtype) {
  return dtype == KDType::kF16 || dtype == KDType::kBF16 ? KDType::kF32 : dtype;
}

// out[i] = op(a[i], b[i]) for n elements, computed in f32 (f64 for f64, i64 with wraparound
// for integers; float max/min propagate NaN). b holds `dtype`; a and out each hold either
// `dtype` or, when a_is_accum / out_is_accum, KAccumType(dtype). out may alias a or b.
//
// This lets same-GPU collectives match the cpu backend's fold exactly: the cpu sums the
// group's parts in coordinate order in f32 and rounds once, which is
//   acc = Combine(part0 (dtype), part1, out_is_accum) ; acc = Combine(acc (accum), part_i, ..)
//   result = Combine(acc (accum), part_last, out_is_accum = false).
cudaError_t LaunchCombine(KCombineOp op, KDType dtype, const void* a, bool a_is_accum,
                          const void* b, void* out, bool out_is_accum, int64_t n,
                          cudaStream_t stream);

// Same, with a, b and out all of `dtype` (rounds after every pair for f16/bf16).
inline cudaError_t LaunchCombine(KCombineOp op, KDType dtype, const void* a, const void* b,
                                 void* out, int64_t n, cudaStream_t stream) {
  return LaunchCombine(op, dtype, a, false, b, out, false, n, stream);
}

// At most this many buffers per LaunchReduceBuffers call (their pointers travel as kernel
// parameters).
inline constexpr int kMaxReduceBuffers = 128;

// out[i] = inputs[0][i] op inputs[1][i] op ... op inputs[n-1][i], folded in order in f32
// (f64 for f64, i64 with wraparound for integers; i1 sum is a logical or), rounded to
// dtype once: bit for bit backend_cpu's AllReduce of the same parts. `inputs` is a HOST
// array of n >= 1 device pointers (n <= kMaxReduceBuffers); out may alias any input.
cudaError_t LaunchReduceBuffers(KCombineOp op, KDType dtype, const void* const* inputs, int n,
                                void* out, int64_t count, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_ELEMENTWISE_H_
