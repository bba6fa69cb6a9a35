// Reductions over dimensions, softmax and the norms.
//
// Float inputs accumulate in f32 (f64 for f64) with tree reductions, so sums agree with the
// cpu backend's pairwise sums to a few ulp of f32, not bit for bit. Results are rounded to
// the input's element type once. Launch-only, like elementwise.h.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_REDUCE_H_
#define COMMIR_BACKEND_CUDA_KERNELS_REDUCE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend_cuda/kernels/dtype.h"
#include "commir/reduction_fn.h"

namespace commir::cuda_kernels {

// Reduces x (row-major, `shape`) over `dims` (distinct, may be negative; empty = copy) into
// y, whose row-major layout is x's shape with the reduced extents dropped (the same bytes
// as keepdim). Empty reductions give 0 for sum, NaN for a float mean, -inf/+inf (integer
// lowest/highest) for max/min; an empty integer mean writes 0 and raises kErrEmptyIntMean.
// Integer mean is floor(sum / count). Float max/min propagate NaN. y must not alias x.
cudaError_t LaunchReduce(ReductionFn op, KDType dtype, const void* x,
                         std::span<const int64_t> shape, std::span<const int64_t> dims, void* y,
                         int32_t* error_flag, cudaStream_t stream);

// Softmax of x along `dim` (may be negative), computed in f32 (f64 for f64): exp(x - max) /
// sum. A slice that is all -inf gives NaN, as in the cpu backend. Float types only; y may
// alias x.
cudaError_t LaunchSoftmax(KDType dtype, const void* x, std::span<const int64_t> shape,
                          int64_t dim, void* y, cudaStream_t stream);

// LayerNorm over the last dimension of x viewed as [rows, n]:
// (x - mean) / sqrt(var + eps) * weight + bias, biased variance, computed in f32 (f64 for
// f64 x). weight and bias are length-n vectors with their own float types. y may alias x.
cudaError_t LaunchLayerNorm(KDType dtype, const void* x, int64_t rows, int64_t n,
                            KDType weight_dtype, const void* weight, KDType bias_dtype,
                            const void* bias, double eps, void* y, cudaStream_t stream);

// RmsNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight.
cudaError_t LaunchRmsNorm(KDType dtype, const void* x, int64_t rows, int64_t n,
                          KDType weight_dtype, const void* weight, double eps, void* y,
                          cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_REDUCE_H_
