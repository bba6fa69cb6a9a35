// top_k over the last dimension (docs/language.md, "top_k"): the same selection as the cpu
// backend's kernel, bit for bit (values are copied, the order is total). Launch-only.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_TOPK_H_
#define COMMIR_BACKEND_CUDA_KERNELS_TOPK_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

// x viewed as [rows, n]; values [rows, k] of x's dtype and indices [rows, k] of i64: each
// row's k largest entries, descending, NaN above every number, equal values by the lower
// index. Any float dtype, i32 or i64 (i1 and k outside [1, n] give cudaErrorInvalidValue).
// One thread per row keeps its k best in the outputs by insertion, so a row costs up to
// n x k comparisons: meant for the small k of sampling and routing.
cudaError_t LaunchTopK(KDType dtype, const void* x, int64_t rows, int64_t n, int64_t k,
                       void* values, int64_t* indices, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_TOPK_H_
