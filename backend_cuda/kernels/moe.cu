// The mixture-of-experts pair: slots by a walk per expert, then row copies.
#include "backend_cuda/kernels/moe.h"

#include <cstdint>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {
namespace {

template <typename I>
__global__ void MoeSlotsKernel(const I* __restrict__ experts_of, MoeShape s,
                               int64_t* __restrict__ slots, int32_t* flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t group_tokens = s.tokens / s.groups;
  // One thread per (group, expert): each group is routed on its own.
  for (int64_t ge = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       ge < s.groups * s.experts; ge += stride) {
    const int64_t g = ge / s.experts;
    const int64_t e = ge % s.experts;
    int64_t filled = 0;
    for (int64_t j = 0; j < s.k; ++j) {
      for (int64_t t = g * group_tokens; t < (g + 1) * group_tokens; ++t) {
        const int64_t choice = t * s.k + j;
        const int64_t id = static_cast<int64_t>(experts_of[choice]);
        if (id < 0 || id >= s.experts) {
          // Expert 0's thread of the group reports and drops the choices no expert owns.
          if (e == 0) {
            RaiseError(flag, kErrIndexOutOfRange);
            slots[choice] = -1;
          }
          continue;
        }
        if (id != e) continue;
        slots[choice] = filled < s.capacity ? (e * s.groups + g) * s.capacity + filled : -1;
        ++filled;
      }
    }
  }
}

template <typename T>
__global__ void MoeDispatchKernel(const T* __restrict__ rows, bool per_choice, MoeShape s,
                                  const int64_t* __restrict__ slots, T* __restrict__ out) {
  const int64_t n = s.tokens * s.k * s.hidden;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t h = i % s.hidden;
    const int64_t choice = i / s.hidden;
    const int64_t slot = slots[choice];
    if (slot < 0) continue;  // dropped; the slot it would have taken stays zero
    const int64_t row = per_choice ? choice : choice / s.k;
    out[slot * s.hidden + h] = rows[row * s.hidden + h];
  }
}

template <typename T>
__global__ void MoeCollectKernel(const T* __restrict__ buffer, MoeShape s,
                                 const int64_t* __restrict__ slots, T* __restrict__ out) {
  const int64_t n = s.tokens * s.k * s.hidden;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t slot = slots[i / s.hidden];
    out[i] = slot < 0 ? T{} : buffer[slot * s.hidden + i % s.hidden];  // zero bits: 0
  }
}

bool Valid(const MoeShape& s) {
  return s.tokens >= 0 && s.k >= 0 && s.experts >= 1 && s.capacity >= 1 && s.hidden >= 0 &&
         s.groups >= 1 && s.tokens % s.groups == 0;
}

}  // namespace

cudaError_t LaunchMoeSlots(KDType index_type, const void* experts_of, const MoeShape& shape,
                           int64_t* slots, int32_t* error_flag, cudaStream_t stream) {
  if (!Valid(shape)) return cudaErrorInvalidValue;
  if (shape.tokens * shape.k == 0) return cudaSuccess;
  if (index_type == KDType::kI32) {
    MoeSlotsKernel<int32_t><<<GridFor(shape.groups * shape.experts), kThreads, 0, stream>>>(
        static_cast<const int32_t*>(experts_of), shape, slots, error_flag);
  } else if (index_type == KDType::kI64) {
    MoeSlotsKernel<int64_t><<<GridFor(shape.groups * shape.experts), kThreads, 0, stream>>>(
        static_cast<const int64_t*>(experts_of), shape, slots, error_flag);
  } else {
    return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

cudaError_t LaunchMoeDispatch(KDType dtype, const void* rows, bool per_choice,
                              const MoeShape& shape, const int64_t* slots, void* out,
                              cudaStream_t stream) {
  if (!Valid(shape)) return cudaErrorInvalidValue;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const size_t bytes =
        static_cast<size_t>(shape.experts * shape.groups * shape.capacity * shape.hidden) *
        sizeof(T);
    if (bytes == 0) return cudaSuccess;
    if (cudaError_t e = cudaMemsetAsync(out, 0, bytes, stream); e != cudaSuccess) return e;
    const int64_t n = shape.tokens * shape.k * shape.hidden;
    if (n == 0) return cudaSuccess;
    MoeDispatchKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
        static_cast<const T*>(rows), per_choice, shape, slots, static_cast<T*>(out));
    return cudaGetLastError();
  });
}

cudaError_t LaunchMoeCollect(KDType dtype, const void* buffer, const MoeShape& shape,
                             const int64_t* slots, void* out, cudaStream_t stream) {
  if (!Valid(shape)) return cudaErrorInvalidValue;
  const int64_t n = shape.tokens * shape.k * shape.hidden;
  if (n == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    MoeCollectKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
        static_cast<const T*>(buffer), shape, slots, static_cast<T*>(out));
    return cudaGetLastError();
  });
}

}  // namespace commir::cuda_kernels
