// Device-side helpers shared by the kernel files: storage types and their compute types,
// conversions that round exactly like runtime/tensor.cc, NaN-propagating max/min, warp and
// block reductions, and launch-size helpers. Included only by .cu files.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_DEVICE_MATH_CUH_
#define COMMIR_BACKEND_CUDA_KERNELS_DEVICE_MATH_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/shape_helpers.h"
#include "commir/scalar_math.h"

namespace commir::cuda_kernels {

// Storage types: f64 double, f32 float, f16 __half, bf16 __nv_bfloat16, i64 int64_t,
// i32 int32_t, i1 uint8_t (0 or 1).
template <typename T>
struct TypeTag {
  using type = T;
};

// Calls fn(TypeTag<T>{}) for the storage type of `dtype`.
template <typename Fn>
cudaError_t DispatchAll(KDType dtype, Fn&& fn) {
  switch (dtype) {
    case KDType::kF64: return fn(TypeTag<double>{});
    case KDType::kF32: return fn(TypeTag<float>{});
    case KDType::kF16: return fn(TypeTag<__half>{});
    case KDType::kBF16: return fn(TypeTag<__nv_bfloat16>{});
    case KDType::kI64: return fn(TypeTag<int64_t>{});
    case KDType::kI32: return fn(TypeTag<int32_t>{});
    case KDType::kI1: return fn(TypeTag<uint8_t>{});
  }
  return cudaErrorInvalidValue;
}

template <typename Fn>
cudaError_t DispatchFloat(KDType dtype, Fn&& fn) {
  switch (dtype) {
    case KDType::kF64: return fn(TypeTag<double>{});
    case KDType::kF32: return fn(TypeTag<float>{});
    case KDType::kF16: return fn(TypeTag<__half>{});
    case KDType::kBF16: return fn(TypeTag<__nv_bfloat16>{});
    default: return cudaErrorInvalidValue;
  }
}

template <typename T>
inline constexpr bool kIsFloatStorage =
    std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, __half> ||
    std::is_same_v<T, __nv_bfloat16>;

// The type a kernel computes in: double for f64, float for other floats, int64_t for
// integers (as backend_cpu/compute_values.h).
template <typename T>
using ComputeOf = std::conditional_t<
    std::is_same_v<T, double>, double,
    std::conditional_t<kIsFloatStorage<T>, float, int64_t>>;

// ---- Conversions ---------------------------------------------------------------------

// Widening loads: exact.
__device__ __forceinline__ double ToDouble(double x) { return x; }
__device__ __forceinline__ double ToDouble(float x) { return x; }
__device__ __forceinline__ double ToDouble(__half x) { return __half2float(x); }
__device__ __forceinline__ double ToDouble(__nv_bfloat16 x) { return __bfloat162float(x); }

// double -> float rounding "to odd" (truncate, set the lowest bit if inexact), so that a
// following round-to-nearest-even into f16/bf16 equals one correct rounding of the double
// (commir/float16.cc does the same on the host).
__device__ __forceinline__ float DoubleToFloatRoundToOdd(double v) {
  if (isnan(v) || isinf(v)) return static_cast<float>(v);
  float r = __double2float_rz(v);  // saturates at +-FLT_MAX, as the host version
  if (static_cast<double>(r) == v) return r;
  return __uint_as_float(__float_as_uint(r) | 1u);
}

// int64 -> double rounding to odd, for the same reason.
__device__ __forceinline__ double Int64ToDoubleRoundToOdd(int64_t v) {
  const uint64_t mag = v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const int bits = 64 - __clzll(static_cast<long long>(mag));
  if (bits <= 53) return static_cast<double>(v);
  const int shift = bits - 53;
  uint64_t kept = mag >> shift;
  if ((mag & ((uint64_t{1} << shift) - 1)) != 0) kept |= 1;
  const double r = ldexp(static_cast<double>(kept), shift);
  return v < 0 ? -r : r;
}

// Stores a double, rounding once into To (the cpu's Tensor::SetFromDouble).
template <typename To>
__device__ __forceinline__ To FromDouble(double v) {
  if constexpr (std::is_same_v<To, double>) {
    return v;
  } else if constexpr (std::is_same_v<To, float>) {
    return __double2float_rn(v);
  } else if constexpr (std::is_same_v<To, __half>) {
    return __float2half_rn(DoubleToFloatRoundToOdd(v));
  } else if constexpr (std::is_same_v<To, __nv_bfloat16>) {
    return __float2bfloat16_rn(DoubleToFloatRoundToOdd(v));
  } else if constexpr (std::is_same_v<To, int64_t>) {
    return scalar_math::RoundToIntegerSaturating<int64_t>(v);
  } else if constexpr (std::is_same_v<To, int32_t>) {
    return scalar_math::RoundToIntegerSaturating<int32_t>(v);
  } else {
    return static_cast<uint8_t>(v != 0.0 ? 1 : 0);
  }
}

// Stores an int64, as Tensor::FromInt64: wraps into i32, i1 is != 0, floats round once.
template <typename To>
__device__ __forceinline__ To FromInt64(int64_t v) {
  if constexpr (std::is_same_v<To, int64_t>) {
    return v;
  } else if constexpr (std::is_same_v<To, int32_t>) {
    return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  } else if constexpr (std::is_same_v<To, uint8_t>) {
    return static_cast<uint8_t>(v != 0 ? 1 : 0);
  } else if constexpr (std::is_same_v<To, double>) {
    return static_cast<double>(v);
  } else if constexpr (std::is_same_v<To, float>) {
    return static_cast<float>(v);  // one rounding, as on the host
  } else {
    return FromDouble<To>(Int64ToDoubleRoundToOdd(v));
  }
}

// Loads a storage value into its compute type.
template <typename T>
__device__ __forceinline__ ComputeOf<T> Load(T x) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half2float(x);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(x);
  } else {
    return static_cast<ComputeOf<T>>(x);
  }
}

// Stores a compute value (float, double or int64) into T, rounding once.
template <typename T, typename C>
__device__ __forceinline__ T Store(C v) {
  if constexpr (std::is_same_v<C, int64_t>) {
    return FromInt64<T>(v);
  } else if constexpr (std::is_same_v<T, __half>) {
    if constexpr (std::is_same_v<C, float>) return __float2half_rn(v);
    else return FromDouble<T>(v);
  } else if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if constexpr (std::is_same_v<C, float>) return __float2bfloat16_rn(v);
    else return FromDouble<T>(v);
  } else if constexpr (std::is_same_v<T, float> && std::is_same_v<C, float>) {
    return v;
  } else {
    return FromDouble<T>(static_cast<double>(v));
  }
}

// Reads element i of a float buffer of any float dtype as double (norm parameters).
__device__ __forceinline__ double LoadAnyFloat(const void* p, KDType t, int64_t i) {
  switch (t) {
    case KDType::kF64: return static_cast<const double*>(p)[i];
    case KDType::kF32: return static_cast<const float*>(p)[i];
    case KDType::kF16: return __half2float(static_cast<const __half*>(p)[i]);
    case KDType::kBF16: return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    default: return 0.0;
  }
}

// ---- Math in float / double (the elementwise functions are commir/scalar_math.h's) ----

__device__ __forceinline__ float DExp(float x) { return expf(x); }
__device__ __forceinline__ double DExp(double x) { return exp(x); }
__device__ __forceinline__ float DLog(float x) { return logf(x); }
__device__ __forceinline__ double DLog(double x) { return log(x); }
__device__ __forceinline__ float DSqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double DSqrt(double x) { return sqrt(x); }
// Multiply and add that the compiler may not fuse into an FMA: used where the cpu
// backend's unfused rounding must be reproduced because the result feeds exp().
__device__ __forceinline__ float MulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double MulRn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float AddRn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double AddRn(double a, double b) { return __dadd_rn(a, b); }

template <typename C>
__device__ __forceinline__ C Infinity() {
  return std::numeric_limits<C>::infinity();
}

// max/min that return NaN when either side is NaN (fmax/fmin would drop it).
template <typename C>
__device__ __forceinline__ C MaxNan(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
  }
  return a < b ? b : a;
}
template <typename C>
__device__ __forceinline__ C MinNan(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    if (isnan(a)) return a;
    if (isnan(b)) return b;
  }
  return b < a ? b : a;
}

__device__ __forceinline__ void RaiseError(int32_t* flag, int32_t bits) {
  if (flag != nullptr) atomicOr(flag, bits);
}

// ---- Reductions within a warp / block ------------------------------------------------

template <typename C, typename Op>
__device__ __forceinline__ C WarpReduce(C v, Op op, int width = 32) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, offset, width));
  }
  return v;
}

// Reduces v over the whole block (blockDim.x a multiple of 32, <= 1024); every thread gets
// the result. `scratch` holds 32 values; the call synchronises the block.
template <typename C, typename Op>
__device__ C BlockReduce(C v, Op op, C* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
  v = WarpReduce(v, op);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < warps; ++w) v = op(v, scratch[w]);
  return v;
}

struct AddOp {
  template <typename C>
  __device__ __forceinline__ C operator()(C a, C b) const {
    if constexpr (std::is_same_v<C, int64_t>) return scalar_math::WrappingAdd(a, b);
    else return a + b;
  }
};
struct MaxOp {
  template <typename C>
  __device__ __forceinline__ C operator()(C a, C b) const { return MaxNan(a, b); }
};
struct MinOp {
  template <typename C>
  __device__ __forceinline__ C operator()(C a, C b) const { return MinNan(a, b); }
};

// ---- Index arithmetic ---------------------------------------------------------------

// Offsets of linear index `i` of a StridedSpace for each operand.
template <int kOperands>
__device__ __forceinline__ void StridedOffsets(const StridedSpace<kOperands>& space, int64_t i,
                                               int64_t (&offsets)[kOperands]) {
  for (int k = 0; k < kOperands; ++k) offsets[k] = 0;
  for (int d = space.rank - 1; d >= 0; --d) {
    const int64_t extent = space.dims[d];
    const int64_t idx = i % extent;
    i /= extent;
    for (int k = 0; k < kOperands; ++k) offsets[k] += idx * space.strides[k][d];
  }
}

// ---- Launch helpers ----------------------------------------------------------------

inline constexpr int kThreads = 256;

// Blocks for a grid-stride loop over `work` items: enough to fill the device several times,
// never more than needed. The SM count is cached per device.
inline int GridFor(int64_t work, int threads = kThreads) {
  static std::atomic<int> sm_count[64] = {};
  int device = 0;
  cudaGetDevice(&device);
  int sms = sm_count[device & 63].load(std::memory_order_relaxed);
  if (sms == 0) {
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        sms <= 0) {
      sms = 80;
    }
    sm_count[device & 63].store(sms, std::memory_order_relaxed);
  }
  const int64_t needed = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(sms) * 16;
  return static_cast<int>(needed < 1 ? 1 : (needed < cap ? needed : cap));
}

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_DEVICE_MATH_CUH_
