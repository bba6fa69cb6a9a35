// gather (a row copy per output element) and scatter_add (a column per thread, indices in
// order: deterministic without atomics).
#include "backend_cuda/kernels/gather.h"

#include <cstdint>
#include <type_traits>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {
namespace {

// Row `indices[k] - offset`, or -1 where it is outside [0, rows) (or the subtraction
// overflows).
template <typename I>
__device__ __forceinline__ int64_t RowOf(const I* indices, int64_t k, int64_t offset,
                                         int64_t rows) {
  const int64_t id = static_cast<int64_t>(indices[k]);
  int64_t row = 0;
  if (offset > 0 ? id < INT64_MIN + offset : id > INT64_MAX + offset) return -1;
  row = id - offset;
  return row >= 0 && row < rows ? row : -1;
}

template <typename T, typename I>
__global__ void GatherKernel(const T* __restrict__ table, RowsShape s, const I* __restrict__ indices,
                             int64_t offset, bool masked, T* __restrict__ out, int32_t* flag) {
  const int64_t n = s.outer * s.count * s.inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    const int64_t j = i % s.inner;
    const int64_t k = (i / s.inner) % s.count;
    const int64_t o = i / (s.inner * s.count);
    const int64_t row = RowOf(indices, k, offset, s.rows);
    if (row < 0) {
      if (!masked) RaiseError(flag, kErrIndexOutOfRange);
      out[i] = T{};  // zero bits: 0 in every element type
    } else {
      out[i] = table[(o * s.rows + row) * s.inner + j];
    }
  }
}

template <typename T, typename C, typename I>
__global__ void ScatterAddKernel(const T* __restrict__ base, RowsShape s,
                                 const I* __restrict__ indices, int64_t offset, bool masked,
                                 const T* __restrict__ updates, C* acc, T* out, int32_t* flag) {
  const int64_t columns = s.outer * s.inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += stride) {
    const int64_t j = c % s.inner;
    const int64_t o = c / s.inner;
    const int64_t first = o * s.rows * s.inner + j;
    for (int64_t r = 0; r < s.rows; ++r) acc[first + r * s.inner] = Load(base[first + r * s.inner]);
    for (int64_t k = 0; k < s.count; ++k) {
      const int64_t row = RowOf(indices, k, offset, s.rows);
      if (row < 0) {
        if (!masked) RaiseError(flag, kErrIndexOutOfRange);
        continue;
      }
      C& sum = acc[first + row * s.inner];
      const C add = Load(updates[(o * s.count + k) * s.inner + j]);
      if constexpr (std::is_same_v<C, int64_t>) {
        sum = static_cast<int64_t>(static_cast<uint64_t>(sum) + static_cast<uint64_t>(add));
      } else {
        sum = AddRn(sum, add);
      }
    }
    if (static_cast<void*>(acc) != static_cast<void*>(out)) {
      for (int64_t r = 0; r < s.rows; ++r) {
        out[first + r * s.inner] = Store<T>(acc[first + r * s.inner]);
      }
    }
  }
}

template <typename Fn>
cudaError_t DispatchIndex(KDType index_type, Fn&& fn) {
  if (index_type == KDType::kI32) return fn(TypeTag<int32_t>{});
  if (index_type == KDType::kI64) return fn(TypeTag<int64_t>{});
  return cudaErrorInvalidValue;
}

bool Valid(const RowsShape& s) {
  return s.outer >= 0 && s.rows >= 0 && s.inner >= 0 && s.count >= 0;
}

}  // namespace

cudaError_t LaunchGather(KDType dtype, const void* table, const RowsShape& shape,
                         KDType index_type, const void* indices, int64_t offset, bool masked,
                         void* out, int32_t* error_flag, cudaStream_t stream) {
  if (!Valid(shape)) return cudaErrorInvalidValue;
  const int64_t n = shape.outer * shape.count * shape.inner;
  if (n == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return DispatchIndex(index_type, [&](auto itag) {
      using I = typename decltype(itag)::type;
      GatherKernel<T, I><<<GridFor(n), kThreads, 0, stream>>>(
          static_cast<const T*>(table), shape, static_cast<const I*>(indices), offset, masked,
          static_cast<T*>(out), error_flag);
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchScatterAdd(KDType dtype, const void* base, const RowsShape& shape,
                             KDType index_type, const void* indices, int64_t offset,
                             bool masked, const void* updates, void* acc, void* out,
                             int32_t* error_flag, cudaStream_t stream) {
  if (!Valid(shape)) return cudaErrorInvalidValue;
  const int64_t columns = shape.outer * shape.inner;
  if (columns == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeOf<T>;
    if (acc == out && !std::is_same_v<C, T>) return cudaErrorInvalidValue;
    return DispatchIndex(index_type, [&](auto itag) {
      using I = typename decltype(itag)::type;
      ScatterAddKernel<T, C, I><<<GridFor(columns), kThreads, 0, stream>>>(
          static_cast<const T*>(base), shape, static_cast<const I*>(indices), offset, masked,
          static_cast<const T*>(updates), static_cast<C*>(acc), static_cast<T*>(out),
          error_flag);
      return cudaGetLastError();
    });
  });
}

}  // namespace commir::cuda_kernels
