// Dropout (dropout.h): one thread per element in a grid-stride loop, each drawing its
// own Philox 4x32-10 word from its global index.
#include "backend_cuda/kernels/dropout.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend_cuda/kernels/device_math.cuh"
#include "commir/philox.h"

namespace commir::cuda_kernels {
namespace {

// The block as at most kMaxRank dimensions with their global strides; dimensions that
// are contiguous in the whole tensor too are merged.
struct BlockSpace {
  int rank = 0;
  int64_t dims[kMaxRank] = {};
  uint64_t strides[kMaxRank] = {};
};

template <typename T>
__global__ void DropoutKernel(const T* x, T* y, int64_t n, BlockSpace space, uint64_t base,
                              uint64_t seed, uint64_t threshold, ComputeOf<T> scale,
                              const void* step_at, bool step_is_i64) {
  uint64_t step = 0;
  if (step_at != nullptr) {
    step = step_is_i64 ? static_cast<uint64_t>(*static_cast<const int64_t*>(step_at))
                       : static_cast<uint64_t>(static_cast<int64_t>(*static_cast<const int32_t*>(step_at)));
  }
  for (int64_t j = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; j < n;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint64_t global = base;
    int64_t rest = j;
    for (int d = space.rank - 1; d >= 0; --d) {
      global += static_cast<uint64_t>(rest % space.dims[d]) * space.strides[d];
      rest /= space.dims[d];
    }
    const ComputeOf<T> v = Load(x[j]);
    // A multiply alone: nothing for the compiler to contract, the same rounding as the host.
    y[j] = philox::DropoutKeeps(seed, global, threshold, step) ? Store<T>(v * scale)
                                                         : Store<T>(ComputeOf<T>{0});
  }
}

}  // namespace

cudaError_t LaunchDropout(KDType dtype, const void* x, void* y, std::span<const int64_t> dims,
                          uint64_t base, std::span<const uint64_t> global_strides, uint64_t seed,
                          uint64_t threshold, double scale, cudaStream_t stream,
                          const void* step, KDType step_dtype) {
  if (dims.size() != global_strides.size()) return cudaErrorInvalidValue;
  if (step != nullptr && step_dtype != KDType::kI64 && step_dtype != KDType::kI32) {
    return cudaErrorInvalidValue;
  }
  BlockSpace space;
  int64_t n = 1;
  // From the innermost dimension out: a dimension whose global stride is the product of
  // the merged inner ones continues them.
  for (size_t k = dims.size(); k-- > 0;) {
    n *= dims[k];
    if (dims[k] == 1) continue;  // moves nothing
    if (space.rank > 0) {
      const int last = space.rank - 1;
      if (global_strides[k] == space.strides[last] * static_cast<uint64_t>(space.dims[last])) {
        space.dims[last] *= dims[k];
        continue;
      }
    }
    if (space.rank == kMaxRank) return cudaErrorInvalidValue;
    space.dims[space.rank] = dims[k];
    space.strides[space.rank] = global_strides[k];
    ++space.rank;
  }
  if (n == 0) return cudaSuccess;
  // Collected innermost first: reverse into row-major order.
  for (int a = 0, b = space.rank - 1; a < b; ++a, --b) {
    const int64_t dim = space.dims[a];
    space.dims[a] = space.dims[b];
    space.dims[b] = dim;
    const uint64_t stride = space.strides[a];
    space.strides[a] = space.strides[b];
    space.strides[b] = stride;
  }
  return DispatchFloat(dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    DropoutKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), n, space, base, seed, threshold,
        static_cast<ComputeOf<T>>(scale), step, step_dtype == KDType::kI64);
    return cudaGetLastError();
  });
}

}  // namespace commir::cuda_kernels
