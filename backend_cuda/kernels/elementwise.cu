// Elementwise kernels (elementwise.h): grid-stride loops that move four elements per thread
// per iteration with one aligned vector access when every pointer allows it.
#include "backend_cuda/kernels/elementwise.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <numbers>
#include <vector>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/shape_helpers.h"
#include "commir/scalar_math.h"

namespace commir::cuda_kernels {
namespace {

constexpr int kVec = 4;

template <typename T>
struct alignas(sizeof(T) * kVec) Pack {
  T v[kVec];
};

template <typename T>
bool Aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % (sizeof(T) * kVec) == 0;
}

// ---- Unary --------------------------------------------------------------------------

// The scalar functions are commir/scalar_math.h's, as on the host; only gelu's tanh form
// is spelled out here (see below).
template <ElementwiseFn kOp, typename C>
__device__ __forceinline__ C ApplyUnary(C x) {
  if constexpr (std::is_same_v<C, int64_t>) {
    if constexpr (kOp == ElementwiseFn::kNeg) return scalar_math::WrappingNeg(x);
    if constexpr (kOp == ElementwiseFn::kAbs) return scalar_math::WrappingAbs(x);
    return scalar_math::Relu(x);
  } else {
    if constexpr (kOp == ElementwiseFn::kNeg) return scalar_math::Neg(x);
    if constexpr (kOp == ElementwiseFn::kAbs) return scalar_math::Abs(x);
    if constexpr (kOp == ElementwiseFn::kExp) return scalar_math::Exp(x);
    if constexpr (kOp == ElementwiseFn::kLog) return scalar_math::Log(x);
    if constexpr (kOp == ElementwiseFn::kSqrt) return scalar_math::Sqrt(x);
    if constexpr (kOp == ElementwiseFn::kRsqrt) return scalar_math::Rsqrt(x);
    if constexpr (kOp == ElementwiseFn::kTanh) return scalar_math::Tanh(x);
    if constexpr (kOp == ElementwiseFn::kSigmoid) return scalar_math::Sigmoid(x);
    if constexpr (kOp == ElementwiseFn::kRelu) return scalar_math::Relu(x);
    if constexpr (kOp == ElementwiseFn::kSilu) return scalar_math::Silu(x);
    if constexpr (kOp == ElementwiseFn::kGeluErf) return scalar_math::GeluErf(x);
    if constexpr (kOp == ElementwiseFn::kGeluTanh) {
      // scalar_math::GeluTanh's formula, unfused: nvcc would contract its multiply-add into
      // an FMA (the host compiler does not), which moves the argument of exp by an ulp that
      // the exponential magnifies by |argument| (up to ~30 ulp in the tail).
      constexpr C kSqrt2OverPi = static_cast<C>(std::numbers::sqrt2 * std::numbers::inv_sqrtpi);
      constexpr C kGeluCubic = static_cast<C>(0.044715);
      constexpr C kTwoSqrt2OverPi = C{2} * kSqrt2OverPi;
      const C cubic = MulRn(MulRn(MulRn(kGeluCubic, x), x), x);
      return x * scalar_math::Sigmoid(MulRn(kTwoSqrt2OverPi, AddRn(x, cubic)));
    }
    return x;
  }
}

template <ElementwiseFn kOp, typename T>
__global__ void UnaryKernel(const T* x, T* y, int64_t n, bool vec) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    const int64_t packs = n / kVec;
    for (int64_t p = i; p < packs; p += stride) {
      Pack<T> in = reinterpret_cast<const Pack<T>*>(x)[p];
      Pack<T> out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) out.v[j] = Store<T>(ApplyUnary<kOp>(Load(in.v[j])));
      reinterpret_cast<Pack<T>*>(y)[p] = out;
    }
    i += packs * kVec;
  }
  for (; i < n; i += stride) y[i] = Store<T>(ApplyUnary<kOp>(Load(x[i])));
}

template <typename T, ElementwiseFn kOp>
cudaError_t LaunchUnaryTyped(const T* x, T* y, int64_t n, cudaStream_t stream) {
  const bool vec = Aligned<T>(x) && Aligned<T>(y);
  UnaryKernel<kOp, T><<<GridFor(vec ? n / kVec + kVec : n), kThreads, 0, stream>>>(x, y, n, vec);
  return cudaGetLastError();
}

template <typename T>
cudaError_t UnaryDispatchOp(ElementwiseFn op, const T* x, T* y, int64_t n, cudaStream_t s) {
  if constexpr (!kIsFloatStorage<T>) {
    switch (op) {
      case ElementwiseFn::kNeg: return LaunchUnaryTyped<T, ElementwiseFn::kNeg>(x, y, n, s);
      case ElementwiseFn::kAbs: return LaunchUnaryTyped<T, ElementwiseFn::kAbs>(x, y, n, s);
      case ElementwiseFn::kRelu: return LaunchUnaryTyped<T, ElementwiseFn::kRelu>(x, y, n, s);
      default: return cudaErrorInvalidValue;  // the others need a float type
    }
  } else {
    switch (op) {
#define COMMIR_UNARY_CASE(name) \
  case ElementwiseFn::name: return LaunchUnaryTyped<T, ElementwiseFn::name>(x, y, n, s);
      COMMIR_UNARY_CASE(kNeg)
      COMMIR_UNARY_CASE(kAbs)
      COMMIR_UNARY_CASE(kExp)
      COMMIR_UNARY_CASE(kLog)
      COMMIR_UNARY_CASE(kSqrt)
      COMMIR_UNARY_CASE(kRsqrt)
      COMMIR_UNARY_CASE(kTanh)
      COMMIR_UNARY_CASE(kSigmoid)
      COMMIR_UNARY_CASE(kRelu)
      COMMIR_UNARY_CASE(kSilu)
      COMMIR_UNARY_CASE(kGeluErf)
      COMMIR_UNARY_CASE(kGeluTanh)
#undef COMMIR_UNARY_CASE
      default: break;  // a two-operand function
    }
    return cudaErrorInvalidValue;
  }
}

// ---- Binary -------------------------------------------------------------------------

template <ElementwiseFn kOp, typename C>
__device__ __forceinline__ C ApplyBinary(C a, C b, int32_t* flag) {
  if constexpr (kOp == ElementwiseFn::kMax) return MaxNan(a, b);
  if constexpr (kOp == ElementwiseFn::kMin) return MinNan(a, b);
  if constexpr (std::is_same_v<C, int64_t>) {
    if constexpr (kOp == ElementwiseFn::kAdd) return scalar_math::WrappingAdd(a, b);
    if constexpr (kOp == ElementwiseFn::kSub) return scalar_math::WrappingSub(a, b);
    if constexpr (kOp == ElementwiseFn::kMul) return scalar_math::WrappingMul(a, b);
    if constexpr (kOp == ElementwiseFn::kDiv) {
      if (b == 0) {
        RaiseError(flag, kErrIntDivByZero);
        return 0;
      }
      return scalar_math::WrappingFloorDiv(a, b);
    }
    if constexpr (kOp == ElementwiseFn::kPow) {
      if (b < 0) {
        RaiseError(flag, kErrIntNegativePow);
        return 0;
      }
      return scalar_math::WrappingPow(a, b);
    }
    return 0;
  } else {
    if constexpr (kOp == ElementwiseFn::kAdd) return scalar_math::Add(a, b);
    if constexpr (kOp == ElementwiseFn::kSub) return scalar_math::Sub(a, b);
    if constexpr (kOp == ElementwiseFn::kMul) return scalar_math::Mul(a, b);
    if constexpr (kOp == ElementwiseFn::kDiv) return scalar_math::Div(a, b);
    if constexpr (kOp == ElementwiseFn::kPow) return scalar_math::Pow(a, b);
    return C{0};
  }
}

// Both operands have out's shape.
template <ElementwiseFn kOp, typename T>
__global__ void BinaryFlatKernel(const T* a, const T* b, T* out, int64_t n, bool vec,
                                 int32_t* flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    const int64_t packs = n / kVec;
    for (int64_t p = i; p < packs; p += stride) {
      const Pack<T> pa = reinterpret_cast<const Pack<T>*>(a)[p];
      const Pack<T> pb = reinterpret_cast<const Pack<T>*>(b)[p];
      Pack<T> po;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        po.v[j] = Store<T>(ApplyBinary<kOp>(Load(pa.v[j]), Load(pb.v[j]), flag));
      }
      reinterpret_cast<Pack<T>*>(out)[p] = po;
    }
    i += packs * kVec;
  }
  for (; i < n; i += stride) out[i] = Store<T>(ApplyBinary<kOp>(Load(a[i]), Load(b[i]), flag));
}

// General broadcasting: operand offsets from the merged index space.
template <ElementwiseFn kOp, typename T>
__global__ void BinaryStridedKernel(const T* a, const T* b, T* out, int64_t n,
                                    StridedSpace<2> space, int32_t* flag) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    int64_t off[2];
    StridedOffsets(space, i, off);
    out[i] = Store<T>(ApplyBinary<kOp>(Load(a[off[0]]), Load(b[off[1]]), flag));
  }
}

template <typename T, ElementwiseFn kOp>
cudaError_t LaunchBinaryTyped(const T* a, std::span<const int64_t> a_shape, const T* b,
                              std::span<const int64_t> b_shape, T* out,
                              std::span<const int64_t> out_shape, int32_t* flag,
                              cudaStream_t stream) {
  const int64_t n = NumElementsOf(out_shape);
  std::vector<int64_t> strides[3];
  if (!BroadcastStrides(a_shape, out_shape, &strides[0]) ||
      !BroadcastStrides(b_shape, out_shape, &strides[1])) {
    return cudaErrorInvalidValue;
  }
  if (n == 0) return cudaSuccess;
  strides[2] = RowMajorStridesOf(out_shape);
  StridedSpace<3> merged;
  if (!BuildStridedSpace<3>(out_shape, strides, &merged)) return cudaErrorInvalidValue;
  // Equal shapes merge to one contiguous dimension (or none for a single element).
  const bool flat = merged.rank == 0 ||
                    (merged.rank == 1 && merged.strides[0][0] == 1 && merged.strides[1][0] == 1);
  if (flat) {
    const bool vec = Aligned<T>(a) && Aligned<T>(b) && Aligned<T>(out);
    BinaryFlatKernel<kOp, T>
        <<<GridFor(vec ? n / kVec + kVec : n), kThreads, 0, stream>>>(a, b, out, n, vec, flag);
    return cudaGetLastError();
  }
  StridedSpace<2> space;
  space.rank = merged.rank;
  for (int d = 0; d < merged.rank; ++d) {
    space.dims[d] = merged.dims[d];
    space.strides[0][d] = merged.strides[0][d];
    space.strides[1][d] = merged.strides[1][d];
  }
  BinaryStridedKernel<kOp, T><<<GridFor(n), kThreads, 0, stream>>>(a, b, out, n, space, flag);
  return cudaGetLastError();
}

// ---- Compare and select -----------------------------------------------------------

// Strides of each of `kOperands` operands broadcast against out_shape, plus out's own,
// merged into one strided space; false when the shapes do not broadcast or the merged
// rank is too large.
template <int kOperands>
bool BroadcastSpace(const std::span<const int64_t> (&shapes)[kOperands],
                    std::span<const int64_t> out_shape, StridedSpace<kOperands + 1>* space) {
  std::vector<int64_t> strides[kOperands + 1];
  for (int k = 0; k < kOperands; ++k) {
    if (!BroadcastStrides(shapes[k], out_shape, &strides[k])) return false;
  }
  strides[kOperands] = RowMajorStridesOf(out_shape);
  return BuildStridedSpace<kOperands + 1>(out_shape, strides, space);
}

template <typename T>
__global__ void CompareKernel(ElementwiseFn op, const T* a, const T* b, uint8_t* out, int64_t n,
                              StridedSpace<3> space) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    int64_t off[3];
    StridedOffsets(space, i, off);
    out[off[2]] = scalar_math::Compare(op, Load(a[off[0]]), Load(b[off[1]])) ? 1 : 0;
  }
}

template <typename T>
__global__ void SelectKernel(const uint8_t* cond, const T* a, const T* b, T* out, int64_t n,
                             StridedSpace<4> space) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    int64_t off[4];
    StridedOffsets(space, i, off);
    out[off[3]] = scalar_math::Select(cond[off[0]] != 0, a[off[1]], b[off[2]]);
  }
}

// ---- Convert, fill, combine -----------------------------------------------------------

template <typename From, typename To>
__device__ __forceinline__ To ConvertValue(From x) {
  if constexpr (kIsFloatStorage<From>) {
    return FromDouble<To>(ToDouble(x));
  } else {
    return FromInt64<To>(static_cast<int64_t>(x));
  }
}

template <typename From, typename To>
__global__ void ConvertKernel(const From* __restrict__ x, To* __restrict__ y, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] = ConvertValue<From, To>(x[i]);
  }
}

template <typename T>
__global__ void FillKernel(T* y, int64_t n, double value) {
  const T v = FromDouble<T>(value);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] = v;
  }
}

// Accumulator storage of T: float for f16/bf16, T otherwise.
template <typename T>
using AccumStorage =
    std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float, T>;

template <typename C>
__device__ __forceinline__ C ApplyCombine(KCombineOp op, C a, C b) {
  switch (op) {
    case KCombineOp::kMax: return MaxNan(a, b);
    case KCombineOp::kMin: return MinNan(a, b);
    default: return AddOp{}(a, b);
  }
}

template <typename T, typename TA, typename TO>
__global__ void CombineKernel(KCombineOp op, const TA* a, const T* b, TO* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    // Reads both before writing, so out may alias a or b.
    const ComputeOf<T> va = static_cast<ComputeOf<T>>(Load(a[i]));
    const ComputeOf<T> vb = Load(b[i]);
    out[i] = Store<TO>(ApplyCombine(op, va, vb));
  }
}

template <typename T, typename TA, typename TO>
cudaError_t LaunchCombineTyped(KCombineOp op, const void* a, const void* b, void* out,
                               int64_t n, cudaStream_t stream) {
  CombineKernel<T, TA, TO><<<GridFor(n), kThreads, 0, stream>>>(
      op, static_cast<const TA*>(a), static_cast<const T*>(b), static_cast<TO*>(out), n);
  return cudaGetLastError();
}

struct BufferList {
  const void* ptrs[kMaxReduceBuffers];
  int n;
};

template <typename T>
__global__ void ReduceBuffersKernel(KCombineOp op, BufferList in, T* out, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    ComputeOf<T> acc = Load(static_cast<const T*>(in.ptrs[0])[i]);
    for (int k = 1; k < in.n; ++k) {
      acc = ApplyCombine(op, acc, Load(static_cast<const T*>(in.ptrs[k])[i]));
    }
    out[i] = Store<T>(acc);  // every input was read first, so out may alias one
  }
}

}  // namespace

cudaError_t LaunchUnary(ElementwiseFn op, KDType dtype, const void* x, void* y, int64_t n,
                        cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return UnaryDispatchOp<T>(op, static_cast<const T*>(x), static_cast<T*>(y), n, stream);
  });
}

cudaError_t LaunchBinary(ElementwiseFn op, KDType dtype, const void* a,
                         std::span<const int64_t> a_shape, const void* b,
                         std::span<const int64_t> b_shape, void* out,
                         std::span<const int64_t> out_shape, int32_t* error_flag,
                         cudaStream_t stream) {
  return DispatchAll(dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    const T* ta = static_cast<const T*>(a);
    const T* tb = static_cast<const T*>(b);
    T* to = static_cast<T*>(out);
    switch (op) {
#define COMMIR_BINARY_CASE(name)                                                           \
  case ElementwiseFn::name:                                                                    \
    return LaunchBinaryTyped<T, ElementwiseFn::name>(ta, a_shape, tb, b_shape, to, out_shape, \
                                                 error_flag, stream);
      COMMIR_BINARY_CASE(kAdd)
      COMMIR_BINARY_CASE(kSub)
      COMMIR_BINARY_CASE(kMul)
      COMMIR_BINARY_CASE(kDiv)
      COMMIR_BINARY_CASE(kMax)
      COMMIR_BINARY_CASE(kMin)
      COMMIR_BINARY_CASE(kPow)
#undef COMMIR_BINARY_CASE
      default: break;  // a one-operand function
    }
    return cudaErrorInvalidValue;
  });
}

cudaError_t LaunchCompare(ElementwiseFn op, KDType dtype, const void* a,
                          std::span<const int64_t> a_shape, const void* b,
                          std::span<const int64_t> b_shape, void* out,
                          std::span<const int64_t> out_shape, cudaStream_t stream) {
  if (!ElementwiseFnIsPredicate(op)) return cudaErrorInvalidValue;
  StridedSpace<3> space;
  const std::span<const int64_t> shapes[2] = {a_shape, b_shape};
  if (!BroadcastSpace<2>(shapes, out_shape, &space)) return cudaErrorInvalidValue;
  const int64_t n = NumElementsOf(out_shape);
  if (n == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    CompareKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
        op, static_cast<const T*>(a), static_cast<const T*>(b), static_cast<uint8_t*>(out), n,
        space);
    return cudaGetLastError();
  });
}

cudaError_t LaunchSelect(KDType dtype, const void* cond, std::span<const int64_t> cond_shape,
                         const void* a, std::span<const int64_t> a_shape, const void* b,
                         std::span<const int64_t> b_shape, void* out,
                         std::span<const int64_t> out_shape, cudaStream_t stream) {
  StridedSpace<4> space;
  const std::span<const int64_t> shapes[3] = {cond_shape, a_shape, b_shape};
  if (!BroadcastSpace<3>(shapes, out_shape, &space)) return cudaErrorInvalidValue;
  const int64_t n = NumElementsOf(out_shape);
  if (n == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    SelectKernel<T><<<GridFor(n), kThreads, 0, stream>>>(
        static_cast<const uint8_t*>(cond), static_cast<const T*>(a), static_cast<const T*>(b),
        static_cast<T*>(out), n, space);
    return cudaGetLastError();
  });
}

cudaError_t LaunchConvert(KDType from, const void* x, KDType to, void* y, int64_t n,
                          cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  if (from == to) {
    if (x == y) return cudaSuccess;
    return cudaMemcpyAsync(y, x, static_cast<size_t>(n) * KDTypeSize(from),
                           cudaMemcpyDeviceToDevice, stream);
  }
  return DispatchAll(from, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    return DispatchAll(to, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      ConvertKernel<From, To><<<GridFor(n), kThreads, 0, stream>>>(static_cast<const From*>(x),
                                                                   static_cast<To*>(y), n);
      return cudaGetLastError();
    });
  });
}

cudaError_t LaunchFill(KDType dtype, void* y, int64_t n, double value, cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    FillKernel<T><<<GridFor(n), kThreads, 0, stream>>>(static_cast<T*>(y), n, value);
    return cudaGetLastError();
  });
}

cudaError_t LaunchCombine(KCombineOp op, KDType dtype, const void* a, bool a_is_accum,
                          const void* b, void* out, bool out_is_accum, int64_t n,
                          cudaStream_t stream) {
  if (n < 0) return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = AccumStorage<T>;
    if (a_is_accum) {
      return out_is_accum ? LaunchCombineTyped<T, A, A>(op, a, b, out, n, stream)
                          : LaunchCombineTyped<T, A, T>(op, a, b, out, n, stream);
    }
    return out_is_accum ? LaunchCombineTyped<T, T, A>(op, a, b, out, n, stream)
                        : LaunchCombineTyped<T, T, T>(op, a, b, out, n, stream);
  });
}

cudaError_t LaunchReduceBuffers(KCombineOp op, KDType dtype, const void* const* inputs, int n,
                                void* out, int64_t count, cudaStream_t stream) {
  if (n < 1 || n > kMaxReduceBuffers || count < 0 || inputs == nullptr) {
    return cudaErrorInvalidValue;
  }
  if (count == 0) return cudaSuccess;
  BufferList list{};
  list.n = n;
  for (int k = 0; k < n; ++k) list.ptrs[k] = inputs[k];
  return DispatchAll(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    ReduceBuffersKernel<T>
        <<<GridFor(count), kThreads, 0, stream>>>(op, list, static_cast<T*>(out), count);
    return cudaGetLastError();
  });
}

}  // namespace commir::cuda_kernels
