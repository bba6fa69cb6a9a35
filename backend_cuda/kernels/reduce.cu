// Reductions, softmax and the norms (reduce.h).
//
// Two layouts cover every case after merging adjacent dimensions:
//  - "row": the innermost input dimension is reduced (reduce over the last dims, softmax
//    over the last dim, the norms): a warp (short rows) or a whole block (long rows)
//    cooperates on each output element, reading consecutive addresses.
//  - "column": the innermost dimension is kept: 32 neighbouring outputs per block, each
//    reduced by 8 threads that split the reduced elements; neighbouring threads read
//    neighbouring addresses. (Softmax along a non-last dim uses one thread per slice.)
// Float sums inside a thread use Kahan compensation and are combined across threads as a
// tree, so the error stays near the cpu backend's pairwise sums.
#include "backend_cuda/kernels/reduce.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"
#include "backend_cuda/kernels/shape_helpers.h"

namespace commir::cuda_kernels {
namespace {

// Rows up to this length get a warp each; longer rows a 256-thread block.
constexpr int64_t kWarpRowLimit = 1024;

// Reduces over the TPO threads of a row group (a warp, or the whole block).
template <int kTpo, typename C, typename Op>
__device__ __forceinline__ C GroupReduce(C v, Op op, C* scratch) {
  if constexpr (kTpo == 32) {
    return WarpReduce(v, op);
  } else {
    return BlockReduce(v, op, scratch);
  }
}

// Running reduction of one thread's share.
template <typename C, ReductionFn kOp>
struct Accumulator {
  C value;
  C compensation = C{0};  // Kahan: the part of the float sum lost so far, negated

  __device__ __forceinline__ explicit Accumulator(C init) : value(init) {}

  __device__ __forceinline__ void Add(C x) {
    if constexpr (kOp == ReductionFn::kMax) {
      value = MaxNan(value, x);
    } else if constexpr (kOp == ReductionFn::kMin) {
      value = MinNan(value, x);
    } else if constexpr (std::is_same_v<C, int64_t>) {
      value = scalar_math::WrappingAdd(value, x);
    } else {
      const C y = x - compensation;
      const C t = value + y;
      // Once the sum is inf or NaN there is nothing left to compensate, and (t - value) - y
      // would be inf - inf = NaN, turning a sum of +inf into NaN (the cpu's pairwise sum
      // gives inf).
      compensation = isfinite(t) ? (t - value) - y : C{0};
      value = t;
    }
  }
  __device__ __forceinline__ C Result() const {
    if constexpr (std::is_floating_point_v<C> &&
                  (kOp == ReductionFn::kSum || kOp == ReductionFn::kMean)) {
      return value - compensation;
    } else {
      return value;
    }
  }
};

template <ReductionFn kOp>
using CombineOpOf = std::conditional_t<kOp == ReductionFn::kMax, MaxOp,
                                       std::conditional_t<kOp == ReductionFn::kMin, MinOp, AddOp>>;

// The starting value: also the result of an empty max / min / sum.
template <typename T, ReductionFn kOp>
__device__ __forceinline__ ComputeOf<T> InitialValue() {
  using C = ComputeOf<T>;
  if constexpr (kOp == ReductionFn::kSum || kOp == ReductionFn::kMean) {
    return C{0};
  } else if constexpr (std::is_floating_point_v<C>) {
    return kOp == ReductionFn::kMax ? -Infinity<C>() : Infinity<C>();
  } else if constexpr (std::is_same_v<T, uint8_t>) {
    return kOp == ReductionFn::kMax ? 0 : 1;  // i1 holds 0 and 1
  } else {
    return kOp == ReductionFn::kMax ? static_cast<int64_t>(std::numeric_limits<T>::lowest())
                                  : static_cast<int64_t>(std::numeric_limits<T>::max());
  }
}

// Turns the reduced value into the stored result (mean divides; integer mean floors).
template <typename T, ReductionFn kOp>
__device__ __forceinline__ T Finish(ComputeOf<T> v, int64_t count, int32_t* flag) {
  using C = ComputeOf<T>;
  if constexpr (kOp == ReductionFn::kMean) {
    if constexpr (std::is_floating_point_v<C>) {
      return Store<T>(v / static_cast<C>(count));  // 0 / 0 = NaN for an empty mean
    } else {
      if (count == 0) {
        RaiseError(flag, kErrEmptyIntMean);
        return Store<T>(int64_t{0});
      }
      const int64_t q = v / count;
      return Store<T>(q * count != v && v < 0 ? q - 1 : q);  // count > 0: floor
    }
  } else {
    return Store<T>(v);
  }
}

struct ReducePlan {
  StridedSpace<1> kept;     // output index space, input strides
  StridedSpace<1> reduced;  // reduced index space, input strides
  int64_t outputs = 1;
  int64_t count = 1;        // elements per output
  bool row_mode = true;     // innermost input dimension reduced
};

__device__ __forceinline__ int64_t SpaceOffset(const StridedSpace<1>& space, int64_t i) {
  if (space.rank == 1) return i * space.strides[0][0];
  int64_t off[1];
  StridedOffsets(space, i, off);
  return off[0];
}

template <typename T, ReductionFn kOp, int kTpo>
__global__ void ReduceRowKernel(const T* __restrict__ x, T* __restrict__ y, ReducePlan plan,
                                int32_t* flag) {
  using C = ComputeOf<T>;
  __shared__ C scratch[32];
  constexpr int kGroups = kThreads / kTpo;
  const int group = threadIdx.x / kTpo;
  const int lane = threadIdx.x % kTpo;
  // Contiguous reduced run (the common reduce-over-last-dims case): no index arithmetic.
  const bool contiguous = plan.reduced.rank == 1 && plan.reduced.strides[0][0] == 1;
  for (int64_t base_out = static_cast<int64_t>(blockIdx.x) * kGroups; base_out < plan.outputs;
       base_out += static_cast<int64_t>(gridDim.x) * kGroups) {
    const int64_t out = base_out + group;
    Accumulator<C, kOp> acc(InitialValue<T, kOp>());
    if (out < plan.outputs) {
      const T* row = x + SpaceOffset(plan.kept, out);
      for (int64_t r = lane; r < plan.count; r += kTpo) {
        acc.Add(Load(row[contiguous ? r : SpaceOffset(plan.reduced, r)]));
      }
    }
    const C total = GroupReduce<kTpo>(acc.Result(), CombineOpOf<kOp>{}, scratch);
    if (lane == 0 && out < plan.outputs) y[out] = Finish<T, kOp>(total, plan.count, flag);
  }
}

// Column layout: a block covers 32 consecutive outputs (contiguous in x, since the
// innermost dimension is kept) and 8 row groups; thread (tx, ty) reduces the reduced
// elements r = ty, ty + 8, ... of output tx, and the 8 partials are combined in order. The
// split keeps enough blocks busy when there are few outputs and many reduced elements.
constexpr int kColumnOutputs = 32;
constexpr int kColumnGroups = kThreads / kColumnOutputs;

template <typename T, ReductionFn kOp>
__global__ void ReduceColumnKernel(const T* __restrict__ x, T* __restrict__ y, ReducePlan plan,
                                   int32_t* flag) {
  using C = ComputeOf<T>;
  __shared__ C partial[kColumnGroups][kColumnOutputs + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kColumnOutputs; base < plan.outputs;
       base += static_cast<int64_t>(gridDim.x) * kColumnOutputs) {
    const int64_t out = base + tx;
    Accumulator<C, kOp> acc(InitialValue<T, kOp>());
    if (out < plan.outputs) {
      const T* column = x + SpaceOffset(plan.kept, out);
      for (int64_t r = ty; r < plan.count; r += kColumnGroups) {
        acc.Add(Load(column[SpaceOffset(plan.reduced, r)]));
      }
    }
    partial[ty][tx] = acc.Result();
    __syncthreads();
    if (ty == 0 && out < plan.outputs) {
      C total = partial[0][tx];
      for (int g = 1; g < kColumnGroups; ++g) total = CombineOpOf<kOp>{}(total, partial[g][tx]);
      y[out] = Finish<T, kOp>(total, plan.count, flag);
    }
    __syncthreads();  // partial is rewritten by the next round
  }
}

// Splits x's dimensions into merged kept / reduced groups.
bool MakeReducePlan(std::span<const int64_t> shape, std::span<const int64_t> dims,
                    ReducePlan* plan) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  std::vector<bool> reduced(rank, false);
  for (int64_t d : dims) {
    const int64_t n = NormalizeDimIndex(d, rank);
    if (n < 0 || reduced[n]) return false;
    reduced[n] = true;
  }
  const std::vector<int64_t> strides = RowMajorStridesOf(shape);
  std::vector<int64_t> kept_dims, kept_strides, red_dims, red_strides;
  int last_kind = -1;  // kind of the innermost non-unit dimension: 0 kept, 1 reduced
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced[d]) {
      plan->count *= shape[d];
    } else {
      plan->outputs *= shape[d];
    }
    if (shape[d] == 1) continue;
    (reduced[d] ? red_dims : kept_dims).push_back(shape[d]);
    (reduced[d] ? red_strides : kept_strides).push_back(strides[d]);
    last_kind = reduced[d] ? 1 : 0;
  }
  plan->row_mode = last_kind != 0;
  const std::vector<int64_t> ks[1] = {kept_strides};
  const std::vector<int64_t> rs[1] = {red_strides};
  return BuildStridedSpace<1>(kept_dims, ks, &plan->kept) &&
         BuildStridedSpace<1>(red_dims, rs, &plan->reduced);
}

template <typename T, ReductionFn kOp>
cudaError_t LaunchReduceTyped(const T* x, std::span<const int64_t> shape,
                              std::span<const int64_t> dims, T* y, int32_t* flag,
                              cudaStream_t stream) {
  ReducePlan plan;
  if (!MakeReducePlan(shape, dims, &plan)) return cudaErrorInvalidValue;
  if (plan.outputs == 0) return cudaSuccess;
  if (plan.row_mode || plan.count == 0) {
    if (plan.count <= kWarpRowLimit) {
      const int64_t blocks = (plan.outputs + kThreads / 32 - 1) / (kThreads / 32);
      ReduceRowKernel<T, kOp, 32>
          <<<GridFor(blocks * kThreads), kThreads, 0, stream>>>(x, y, plan, flag);
    } else {
      ReduceRowKernel<T, kOp, kThreads>
          <<<GridFor(plan.outputs * kThreads), kThreads, 0, stream>>>(x, y, plan, flag);
    }
  } else {
    const int64_t blocks = (plan.outputs + kColumnOutputs - 1) / kColumnOutputs;
    ReduceColumnKernel<T, kOp><<<GridFor(blocks * kThreads), dim3(kColumnOutputs, kColumnGroups),
                                 0, stream>>>(x, y, plan, flag);
  }
  return cudaGetLastError();
}

// ---- Softmax ------------------------------------------------------------------------

template <typename T, int kTpo>
__global__ void SoftmaxRowKernel(const T* x, T* y, int64_t rows, int64_t n) {
  using C = ComputeOf<T>;
  __shared__ C scratch[32];
  constexpr int kGroups = kThreads / kTpo;
  const int group = threadIdx.x / kTpo;
  const int lane = threadIdx.x % kTpo;
  for (int64_t base_row = static_cast<int64_t>(blockIdx.x) * kGroups; base_row < rows;
       base_row += static_cast<int64_t>(gridDim.x) * kGroups) {
    const int64_t row = base_row + group;
    const bool active = row < rows;
    const T* in = x + row * n;
    C maximum = -Infinity<C>();
    if (active) {
      for (int64_t i = lane; i < n; i += kTpo) maximum = MaxNan(maximum, Load(in[i]));
    }
    maximum = GroupReduce<kTpo>(maximum, MaxOp{}, scratch);
    C sum = 0;
    if (active) {
      for (int64_t i = lane; i < n; i += kTpo) sum += DExp(Load(in[i]) - maximum);
    }
    sum = GroupReduce<kTpo>(sum, AddOp{}, scratch);
    const C inverse_sum = C{1} / sum;
    if (active) {
      for (int64_t i = lane; i < n; i += kTpo) {
        y[row * n + i] = Store<T>(DExp(Load(in[i]) - maximum) * inverse_sum);
      }
    }
  }
}

// Softmax slices strided by `inner`: one thread per slice.
template <typename T>
__global__ void SoftmaxColumnKernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using C = ComputeOf<T>;
  const int64_t slices = outer * inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t s = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; s < slices;
       s += stride) {
    const int64_t base = (s / inner) * n * inner + s % inner;
    C maximum = -Infinity<C>();
    for (int64_t i = 0; i < n; ++i) maximum = MaxNan(maximum, Load(x[base + i * inner]));
    Accumulator<C, ReductionFn::kSum> sum(C{0});
    for (int64_t i = 0; i < n; ++i) sum.Add(DExp(Load(x[base + i * inner]) - maximum));
    const C inverse_sum = C{1} / sum.Result();
    for (int64_t i = 0; i < n; ++i) {
      y[base + i * inner] = Store<T>(DExp(Load(x[base + i * inner]) - maximum) * inverse_sum);
    }
  }
}

// ---- Norms --------------------------------------------------------------------------

// kLayerNorm: (x - mean) * inv_std * w + b; otherwise rms: x * inv_rms * w.
template <typename T, int kTpo, bool kLayerNorm>
__global__ void NormKernel(const T* x, T* y, int64_t rows, int64_t n, KDType wt,
                           const void* weight, KDType bt, const void* bias, double eps) {
  using C = ComputeOf<T>;
  __shared__ C scratch[32];
  constexpr int kGroups = kThreads / kTpo;
  const int group = threadIdx.x / kTpo;
  const int lane = threadIdx.x % kTpo;
  for (int64_t base_row = static_cast<int64_t>(blockIdx.x) * kGroups; base_row < rows;
       base_row += static_cast<int64_t>(gridDim.x) * kGroups) {
    const int64_t row = base_row + group;
    const bool active = row < rows;
    const T* in = x + row * n;
    C mean = 0;
    if constexpr (kLayerNorm) {
      Accumulator<C, ReductionFn::kSum> sum(C{0});
      if (active) {
        for (int64_t i = lane; i < n; i += kTpo) sum.Add(Load(in[i]));
      }
      mean = GroupReduce<kTpo>(sum.Result(), AddOp{}, scratch) / static_cast<C>(n);
    }
    // Second pass over the deviations avoids the cancellation of E[x^2] - E[x]^2.
    Accumulator<C, ReductionFn::kSum> squares(C{0});
    if (active) {
      for (int64_t i = lane; i < n; i += kTpo) {
        const C d = Load(in[i]) - mean;
        squares.Add(d * d);
      }
    }
    const C total = GroupReduce<kTpo>(squares.Result(), AddOp{}, scratch);
    const C inverse = C{1} / DSqrt(total / static_cast<C>(n) + static_cast<C>(eps));
    if (active) {
      for (int64_t i = lane; i < n; i += kTpo) {
        const C w = static_cast<C>(LoadAnyFloat(weight, wt, i));
        C v = (Load(in[i]) - mean) * inverse * w;
        if constexpr (kLayerNorm) v += static_cast<C>(LoadAnyFloat(bias, bt, i));
        y[row * n + i] = Store<T>(v);
      }
    }
  }
}

template <bool kLayerNorm>
cudaError_t LaunchNorm(KDType dtype, const void* x, int64_t rows, int64_t n, KDType wt,
                       const void* weight, KDType bt, const void* bias, double eps, void* y,
                       cudaStream_t stream) {
  if (rows < 0 || n < 0 || !KDTypeIsFloat(wt) || (kLayerNorm && !KDTypeIsFloat(bt))) {
    return cudaErrorInvalidValue;
  }
  if (rows == 0 || n == 0) return cudaSuccess;
  return DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    if (n <= kWarpRowLimit) {
      const int64_t blocks = (rows + kThreads / 32 - 1) / (kThreads / 32);
      NormKernel<T, 32, kLayerNorm><<<GridFor(blocks * kThreads), kThreads, 0, stream>>>(
          in, out, rows, n, wt, weight, bt, bias, eps);
    } else {
      NormKernel<T, kThreads, kLayerNorm><<<GridFor(rows * kThreads), kThreads, 0, stream>>>(
          in, out, rows, n, wt, weight, bt, bias, eps);
    }
    return cudaGetLastError();
  });
}

}  // namespace

cudaError_t LaunchReduce(ReductionFn op, KDType dtype, const void* x,
                         std::span<const int64_t> shape, std::span<const int64_t> dims, void* y,
                         int32_t* error_flag, cudaStream_t stream) {
  return DispatchAll(dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    switch (op) {
      case ReductionFn::kSum:
        return LaunchReduceTyped<T, ReductionFn::kSum>(in, shape, dims, out, error_flag, stream);
      case ReductionFn::kMax:
        return LaunchReduceTyped<T, ReductionFn::kMax>(in, shape, dims, out, error_flag, stream);
      case ReductionFn::kMin:
        return LaunchReduceTyped<T, ReductionFn::kMin>(in, shape, dims, out, error_flag, stream);
      case ReductionFn::kMean:
        return LaunchReduceTyped<T, ReductionFn::kMean>(in, shape, dims, out, error_flag, stream);
    }
    return cudaErrorInvalidValue;
  });
}

cudaError_t LaunchSoftmax(KDType dtype, const void* x, std::span<const int64_t> shape,
                          int64_t dim, void* y, cudaStream_t stream) {
  const int64_t rank = static_cast<int64_t>(shape.size());
  // A 0-d tensor is one slice of one element (dim 0 or -1), as in the cpu backend.
  const int64_t d = NormalizeDimIndex(dim, rank == 0 ? 1 : rank);
  if (d < 0) return cudaErrorInvalidValue;
  int64_t outer = 1, inner = 1;
  const int64_t n = rank == 0 ? 1 : shape[d];
  for (int64_t i = 0; i < d && i < rank; ++i) outer *= shape[i];
  for (int64_t i = d + 1; i < rank; ++i) inner *= shape[i];
  if (outer * n * inner == 0) return cudaSuccess;
  return DispatchFloat(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* in = static_cast<const T*>(x);
    T* out = static_cast<T*>(y);
    if (inner == 1) {
      if (n <= kWarpRowLimit) {
        const int64_t blocks = (outer + kThreads / 32 - 1) / (kThreads / 32);
        SoftmaxRowKernel<T, 32>
            <<<GridFor(blocks * kThreads), kThreads, 0, stream>>>(in, out, outer, n);
      } else {
        SoftmaxRowKernel<T, kThreads>
            <<<GridFor(outer * kThreads), kThreads, 0, stream>>>(in, out, outer, n);
      }
    } else {
      SoftmaxColumnKernel<T>
          <<<GridFor(outer * inner), kThreads, 0, stream>>>(in, out, outer, n, inner);
    }
    return cudaGetLastError();
  });
}

cudaError_t LaunchLayerNorm(KDType dtype, const void* x, int64_t rows, int64_t n,
                            KDType weight_dtype, const void* weight, KDType bias_dtype,
                            const void* bias, double eps, void* y, cudaStream_t stream) {
  return LaunchNorm<true>(dtype, x, rows, n, weight_dtype, weight, bias_dtype, bias, eps, y,
                          stream);
}

cudaError_t LaunchRmsNorm(KDType dtype, const void* x, int64_t rows, int64_t n,
                          KDType weight_dtype, const void* weight, double eps, void* y,
                          cudaStream_t stream) {
  return LaunchNorm<false>(dtype, x, rows, n, weight_dtype, weight, KDType::kF32, nullptr, eps,
                           y, stream);
}

}  // namespace commir::cuda_kernels
