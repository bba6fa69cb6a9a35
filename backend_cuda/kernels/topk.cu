// top_k: one thread per row, insertion into the row's sorted outputs.
#include "backend_cuda/kernels/topk.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {
namespace {

template <typename C>
__device__ __forceinline__ bool IsNanValue(C v) {
  if constexpr (std::is_floating_point_v<C>) return v != v;
  return false;
}

// Whether a kept entry (a lower index than the incoming one, since a row is read in
// order) ranks before the incoming value: the cpu kernel's order, NaN first, then larger
// values, then the lower index.
template <typename C>
__device__ __forceinline__ bool KeptRanksFirst(C kept, C incoming) {
  if (IsNanValue(kept)) return true;
  if (IsNanValue(incoming)) return false;
  return kept >= incoming;
}

template <typename T>
__global__ void TopKRowKernel(const T* x, int64_t rows, int64_t n, int64_t k, T* values,
                              int64_t* indices) {
  using C = ComputeOf<T>;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < rows;
       row += stride) {
    const T* in = x + row * n;
    T* out = values + row * k;
    int64_t* pos = indices + row * k;
    int64_t kept = 0;
    for (int64_t j = 0; j < n; ++j) {
      const C v = Load(in[j]);
      if (kept == k && KeptRanksFirst(Load(out[k - 1]), v)) continue;
      // Shift the entries that rank after v one place down (dropping the last when full).
      int64_t slot = kept < k ? kept : k - 1;
      while (slot > 0 && !KeptRanksFirst(Load(out[slot - 1]), v)) {
        out[slot] = out[slot - 1];
        pos[slot] = pos[slot - 1];
        --slot;
      }
      out[slot] = in[j];  // the element itself: no rounding, a NaN keeps its payload
      pos[slot] = j;
      if (kept < k) ++kept;
    }
  }
}

}  // namespace

cudaError_t LaunchTopK(KDType dtype, const void* x, int64_t rows, int64_t n, int64_t k,
                       void* values, int64_t* indices, cudaStream_t stream) {
  if (dtype == KDType::kI1 || k < 1 || k > n || rows < 0) return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    TopKRowKernel<T><<<GridFor(rows), kThreads, 0, stream>>>(
        static_cast<const T*>(x), rows, n, k, static_cast<T*>(values), indices);
    return cudaGetLastError();
  });
}

}  // namespace commir::cuda_kernels
