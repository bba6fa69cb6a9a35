// cross_entropy and cross_entropy_grad: one block per row of logits (cross_entropy.h).
#include "backend_cuda/kernels/cross_entropy.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {
namespace {

__device__ __forceinline__ int64_t LoadLabel(const void* labels, KDType type, int64_t i) {
  return type == KDType::kI32 ? static_cast<int64_t>(static_cast<const int32_t*>(labels)[i])
                              : static_cast<const int64_t*>(labels)[i];
}

// Per token: lse, and the loss measured from the row's maximum (cpu kernel's formula):
// log_sum + (1 - s)(max - x_t) + s mean_j(max - x_j) + z lse^2; 0 when ignored or bad.
template <typename T>
__global__ void CrossEntropyRowKernel(KCrossEntropyArgs a, const T* x, ComputeOf<T>* lse,
                                      ComputeOf<T>* token_loss, int32_t* flag) {
  using C = ComputeOf<T>;
  __shared__ C scratch[32];
  const C s = static_cast<C>(a.label_smoothing);
  const C z = static_cast<C>(a.z_loss);
  for (int64_t row = blockIdx.x; row < a.tokens; row += gridDim.x) {
    const T* in = x + row * a.classes;
    C maximum = -Infinity<C>();
    for (int64_t j = threadIdx.x; j < a.classes; j += blockDim.x) {
      maximum = MaxNan(maximum, Load(in[j]));
    }
    maximum = BlockReduce(maximum, MaxOp{}, scratch);
    const bool finite = isfinite(maximum);
    C sum = 0, distance = 0;
    for (int64_t j = threadIdx.x; j < a.classes; j += blockDim.x) {
      const C v = Load(in[j]);
      if (finite) sum += DExp(v - maximum);
      distance += maximum - v;
    }
    sum = BlockReduce(sum, AddOp{}, scratch);
    if (s != C{0}) distance = BlockReduce(distance, AddOp{}, scratch);
    if (threadIdx.x == 0) {
      const C log_sum = finite ? DLog(sum) : C{0};
      const C row_lse = maximum + log_sum;
      lse[row] = row_lse;
      const int64_t t = LoadLabel(a.labels, a.label_dtype, row);
      C value = 0;
      if (t != a.ignore_index) {
        if (t < 0 || t >= a.classes) {
          RaiseError(flag, kErrLabelOutOfRange);
        } else {
          value = log_sum + (C{1} - s) * (maximum - Load(in[t]));
          if (s != C{0}) value += s * distance / static_cast<C>(a.classes);
          if (z != C{0}) value += z * row_lse * row_lse;
        }
      }
      token_loss[row] = value;
    }
  }
}

// The vocabulary-parallel form: per token, the shard's share of the loss given the whole
// vocabulary's lse: [offset == 0] (lse + z lse^2) - (1 - s) x_t (t in the shard) - s/V
// sum_j x_j; 0 when ignored or bad. lse is copied through.
template <typename T>
__global__ void CrossEntropyShareKernel(KCrossEntropyArgs a, const T* x, ComputeOf<T>* lse,
                                        ComputeOf<T>* token_loss, int32_t* flag) {
  using C = ComputeOf<T>;
  __shared__ C scratch[32];
  const C s = static_cast<C>(a.label_smoothing);
  const C z = static_cast<C>(a.z_loss);
  const C* whole_lse = static_cast<const C*>(a.lse_in);
  for (int64_t row = blockIdx.x; row < a.tokens; row += gridDim.x) {
    const T* in = x + row * a.classes;
    C sum = 0;
    if (s != C{0}) {
      for (int64_t j = threadIdx.x; j < a.classes; j += blockDim.x) sum += Load(in[j]);
      sum = BlockReduce(sum, AddOp{}, scratch);
    }
    if (threadIdx.x == 0) {
      const C l = whole_lse[row];
      lse[row] = l;
      const int64_t t = LoadLabel(a.labels, a.label_dtype, row);
      C value = 0;
      if (t != a.ignore_index) {
        if (t < 0 || t >= a.vocab) {
          RaiseError(flag, kErrLabelOutOfRange);
        } else {
          if (a.offset == 0) value = l + z * l * l;
          if (t >= a.offset && t < a.offset + a.classes) {
            value -= (C{1} - s) * Load(in[t - a.offset]);
          }
          if (s != C{0}) value -= s * sum / static_cast<C>(a.vocab);
        }
      }
      token_loss[row] = value;
    }
  }
}

// One block: the sum of the token losses, divided for a mean by the tokens not ignored.
template <typename T>
__global__ void ReduceLossKernel(KCrossEntropyArgs a, const ComputeOf<T>* token_loss, T* loss) {
  using C = ComputeOf<T>;
  __shared__ C scratch[32];
  C sum = 0, counted = 0;
  for (int64_t i = threadIdx.x; i < a.tokens; i += blockDim.x) {
    sum += token_loss[i];
    counted += LoadLabel(a.labels, a.label_dtype, i) != a.ignore_index ? C{1} : C{0};
  }
  sum = BlockReduce(sum, AddOp{}, scratch);
  counted = BlockReduce(counted, AddOp{}, scratch);
  if (threadIdx.x == 0) *loss = Store<T>(a.reduction == 0 ? sum / counted : sum);
}

template <typename C, typename T>
__global__ void StoreLossesKernel(const C* token_loss, T* loss, int64_t tokens) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < tokens;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    loss[i] = Store<T>(token_loss[i]);
  }
}

// dlogits_ij = w (p_ij (1 + 2 z lse) - s / V) - w (1 - s) [j == t], p = exp(x - lse).
template <typename T, typename G>
__global__ void CrossEntropyGradKernel(KCrossEntropyArgs a, const T* x,
                                       const ComputeOf<T>* lse, const G* dloss, G* dx,
                                       int32_t* flag) {
  using C = ComputeOf<G>;
  __shared__ C scratch[32];
  const C s = static_cast<C>(a.label_smoothing);
  const C z = static_cast<C>(a.z_loss);
  C count = 1;
  if (a.reduction == 0) {
    C counted = 0;
    for (int64_t i = threadIdx.x; i < a.tokens; i += blockDim.x) {
      counted += LoadLabel(a.labels, a.label_dtype, i) != a.ignore_index ? C{1} : C{0};
    }
    count = BlockReduce(counted, AddOp{}, scratch);
  }
  for (int64_t row = blockIdx.x; row < a.tokens; row += gridDim.x) {
    const int64_t t = LoadLabel(a.labels, a.label_dtype, row);
    const bool bad = t != a.ignore_index && (t < 0 || t >= a.vocab);
    if (bad && threadIdx.x == 0) RaiseError(flag, kErrLabelOutOfRange);
    C w = (t == a.ignore_index || bad) ? C{0} : Load(dloss[a.reduction == 2 ? row : 0]);
    if (a.reduction == 0) w /= count;
    const C l = static_cast<C>(lse[row]);
    const C p_scale = w * (C{1} + C{2} * z * l);
    const C uniform = w * s / static_cast<C>(a.vocab);
    const int64_t local_t = t - a.offset;
    for (int64_t j = threadIdx.x; j < a.classes; j += blockDim.x) {
      C v = w == C{0} ? C{0}
                      : p_scale * DExp(static_cast<C>(Load(x[row * a.classes + j])) - l) - uniform;
      if (j == local_t) v -= w * (C{1} - s);
      dx[row * a.classes + j] = Store<G>(v);
    }
  }
}

}  // namespace

cudaError_t LaunchCrossEntropy(const KCrossEntropyArgs& args, void* loss, void* lse,
                               void* token_losses, int32_t* error_flag, cudaStream_t stream) {
  // The kernels read the whole vocabulary's size from `vocab`.
  KCrossEntropyArgs whole = args;
  if (whole.vocab == 0) whole.vocab = whole.classes;
  if (whole.classes < 1 || whole.tokens < 0 || whole.offset < 0 ||
      whole.offset > whole.vocab - whole.classes) {
    return cudaErrorInvalidValue;
  }
  if (args.tokens == 0 && args.reduction == 2) return cudaSuccess;
  return DispatchFloat(args.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = ComputeOf<T>;
    C* per_token = static_cast<C*>(token_losses);
    if (args.tokens > 0 && args.lse_in != nullptr) {
      CrossEntropyShareKernel<T><<<GridFor(args.tokens * kThreads), kThreads, 0, stream>>>(
          whole, static_cast<const T*>(args.logits), static_cast<C*>(lse), per_token, error_flag);
    } else if (args.tokens > 0) {
      CrossEntropyRowKernel<T><<<GridFor(args.tokens * kThreads), kThreads, 0, stream>>>(
          whole, static_cast<const T*>(args.logits), static_cast<C*>(lse), per_token, error_flag);
    }
    if (args.reduction == 2) {
      StoreLossesKernel<C, T><<<GridFor(args.tokens), kThreads, 0, stream>>>(
          per_token, static_cast<T*>(loss), args.tokens);
    } else {
      ReduceLossKernel<T><<<1, kThreads, 0, stream>>>(args, per_token, static_cast<T*>(loss));
    }
    return cudaGetLastError();
  });
}

cudaError_t LaunchCrossEntropyGrad(const KCrossEntropyArgs& args, const void* lse,
                                   KDType dloss_dtype, const void* dloss, void* dlogits,
                                   int32_t* error_flag, cudaStream_t stream) {
  // The kernels read the whole vocabulary's size from `vocab`.
  KCrossEntropyArgs whole = args;
  if (whole.vocab == 0) whole.vocab = whole.classes;
  if (whole.classes < 1 || whole.tokens < 0 || whole.offset < 0 ||
      whole.offset > whole.vocab - whole.classes) {
    return cudaErrorInvalidValue;
  }
  if (args.tokens == 0) return cudaSuccess;
  return DispatchFloat(args.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return DispatchFloat(dloss_dtype, [&](auto gtag) {
      using G = typename decltype(gtag)::type;
      CrossEntropyGradKernel<T, G><<<GridFor(args.tokens * kThreads), kThreads, 0, stream>>>(
          whole, static_cast<const T*>(args.logits), static_cast<const ComputeOf<T>*>(lse),
          static_cast<const G*>(dloss), static_cast<G*>(dlogits), error_flag);
      return cudaGetLastError();
    });
  });
}

}  // namespace commir::cuda_kernels
