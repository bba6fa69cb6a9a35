#include "backend_cuda/kernels/attention_merge.h"

#include <algorithm>

#include "backend_cuda/kernels/device_math.cuh"
#include "commir/online_softmax.h"

namespace commir::cuda_kernels {
namespace {

constexpr int kWarp = 32;

struct MergePartials {
  KMergePartial p[kMaxMergePartials];
  int n;
};

// Element i of a float buffer of type t, widened to the compute type C.
template <typename C>
__device__ __forceinline__ C LoadFloat(const void* base, KDType t, int64_t i) {
  switch (t) {
    case KDType::kF64: return static_cast<C>(static_cast<const double*>(base)[i]);
    case KDType::kF32: return static_cast<C>(static_cast<const float*>(base)[i]);
    case KDType::kF16: return static_cast<C>(Load(static_cast<const __half*>(base)[i]));
    case KDType::kBF16: return static_cast<C>(Load(static_cast<const __nv_bfloat16*>(base)[i]));
    default: return C{0};
  }
}

// One warp per row: every lane computes the row's weights (the same bits), then merges
// its columns; lane 0 writes the lse after the warp's reads, so outputs may alias inputs.
template <typename C>
__global__ void AttentionMergeKernel(const C* o_acc, const C* lse_acc, MergePartials parts,
                                     C* o_out, C* lse_out, int64_t rows, int64_t width) {
  const int lane = static_cast<int>(threadIdx.x % kWarp);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / kWarp;
       row < rows; row += warps) {
    online_softmax::RowWeights<C> w[kMaxMergePartials];
    C lse = lse_acc[row];
    for (int k = 0; k < parts.n; ++k) {
      w[k] = online_softmax::MergeWeights(lse, LoadFloat<C>(parts.p[k].lse, parts.p[k].lse_type, row));
      lse = w[k].lse;
    }
    for (int64_t d = lane; d < width; d += kWarp) {
      const int64_t i = row * width + d;
      C o = o_acc[i];
      for (int k = 0; k < parts.n; ++k) {
        o = online_softmax::MergeOutput(o, LoadFloat<C>(parts.p[k].o, parts.p[k].o_type, i), w[k]);
      }
      o_out[i] = o;
    }
    __syncwarp();
    if (lane == 0) lse_out[row] = lse;
  }
}

template <typename C>
cudaError_t LaunchTyped(const C* o_acc, const C* lse_acc, std::span<const KMergePartial> partials,
                        C* o_out, C* lse_out, int64_t rows, int64_t width, cudaStream_t stream) {
  for (size_t first = 0; first < partials.size(); first += kMaxMergePartials) {
    MergePartials chunk{};
    chunk.n = static_cast<int>(std::min<size_t>(kMaxMergePartials, partials.size() - first));
    for (int k = 0; k < chunk.n; ++k) chunk.p[k] = partials[first + k];
    // Later chunks fold into the result so far, in place.
    const C* o_in = first == 0 ? o_acc : o_out;
    const C* lse_in = first == 0 ? lse_acc : lse_out;
    AttentionMergeKernel<C><<<GridFor(rows * kWarp), kThreads, 0, stream>>>(
        o_in, lse_in, chunk, o_out, lse_out, rows, width);
    if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

cudaError_t LaunchAttentionMerge(KDType acc_type, const void* o_acc, const void* lse_acc,
                                 std::span<const KMergePartial> partials, void* o_out,
                                 void* lse_out, int64_t rows, int64_t width,
                                 cudaStream_t stream) {
  if (rows < 0 || width < 0 || partials.empty()) return cudaErrorInvalidValue;
  for (const KMergePartial& p : partials) {
    if (!KDTypeIsFloat(p.o_type) || !KDTypeIsFloat(p.lse_type)) return cudaErrorInvalidValue;
  }
  if (rows == 0) return cudaSuccess;
  if (acc_type == KDType::kF32) {
    return LaunchTyped(static_cast<const float*>(o_acc), static_cast<const float*>(lse_acc),
                       partials, static_cast<float*>(o_out), static_cast<float*>(lse_out), rows,
                       width, stream);
  }
  if (acc_type == KDType::kF64) {
    return LaunchTyped(static_cast<const double*>(o_acc), static_cast<const double*>(lse_acc),
                       partials, static_cast<double*>(o_out), static_cast<double*>(lse_out), rows,
                       width, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace commir::cuda_kernels
