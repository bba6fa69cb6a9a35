// Attention's backward (attention_grad.h). Three passes, each thread owning the rows it
// writes so no atomics are needed: (1) per query row, the corrected log-sum-exp (lse plus
// the log of the row's probability sum; lse itself under partial_keys, whose rows sum to
// the given keys' share only) and delta = dout . o; (2) per query row, dq;
// (3) per key row, dk and dv over every query of the kv head's group. (4) rounds the
// compute-type accumulators into the results' type.
#include "backend_cuda/kernels/attention_grad.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>

#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {
namespace {

struct GradProblem {
  int64_t batch, heads, kv_heads, sq, skv, d, dv, group;
  double scale;
  bool causal;
  bool partial_keys;  // lse used as is: no per-row renormalisation
  int64_t diag;  // q_pos - k_pos, clamped on the host so VisibleKeys stays exact
};

__device__ __forceinline__ int64_t VisibleKeys(const GradProblem& p, int64_t i) {
  if (!p.causal) return p.skv;
  const int64_t v = p.diag + i + 1;
  return v < 0 ? 0 : (v > p.skv ? p.skv : v);
}

template <typename T, typename C>
__device__ C Dot(const T* a, const T* b, int64_t n) {
  C sum = 0;
  for (int64_t c = 0; c < n; ++c) sum += static_cast<C>(Load(a[c])) * static_cast<C>(Load(b[c]));
  return sum;
}

// Row (b * heads + h) * sq + i reads kv row block (b * kv_heads + h / group) * skv.
__device__ __forceinline__ int64_t KvBlock(const GradProblem& p, int64_t row) {
  const int64_t bh = row / p.sq;
  return (bh / p.heads * p.kv_heads + bh % p.heads / p.group) * p.skv;
}

template <typename T, typename C>
__global__ void RowStatsKernel(const T* q, const T* k, const T* o, const float* lse, const T* dout,
                               C* row_lse, C* delta, GradProblem p) {
  const int64_t rows = p.batch * p.heads * p.sq;
  for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < rows;
       row += int64_t{gridDim.x} * blockDim.x) {
    const int64_t visible = VisibleKeys(p, row % p.sq);
    const C given = static_cast<C>(lse[row]);
    delta[row] = Dot<T, C>(dout + row * p.dv, o + row * p.dv, p.dv);
    if (p.partial_keys) {
      row_lse[row] = visible > 0 && !isinf(given) ? given : -Infinity<C>();
      continue;
    }
    const T* kb = k + KvBlock(p, row) * p.d;
    C sum = 0;
    if (visible > 0 && !isinf(given)) {
      for (int64_t j = 0; j < visible; ++j) {
        sum += DExp(Dot<T, C>(q + row * p.d, kb + j * p.d, p.d) * static_cast<C>(p.scale) - given);
      }
    }
    // No probability for this row: -inf makes every exp() below 0.
    row_lse[row] = sum > C{0} ? given + DLog(sum) : -Infinity<C>();
  }
}

template <typename T, typename C>
__global__ void DqKernel(const T* q, const T* k, const T* v, const T* dout, const C* row_lse,
                         const C* delta, C* dq, GradProblem p) {
  const int64_t rows = p.batch * p.heads * p.sq;
  const C scale = static_cast<C>(p.scale);
  for (int64_t row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; row < rows;
       row += int64_t{gridDim.x} * blockDim.x) {
    const int64_t kv = KvBlock(p, row);
    const int64_t visible = isinf(row_lse[row]) ? 0 : VisibleKeys(p, row % p.sq);
    C* acc = dq + row * p.d;
    for (int64_t c = 0; c < p.d; ++c) acc[c] = 0;
    for (int64_t j = 0; j < visible; ++j) {
      const T* kj = k + (kv + j) * p.d;
      const C prob = DExp(Dot<T, C>(q + row * p.d, kj, p.d) * scale - row_lse[row]);
      const C dprob = Dot<T, C>(dout + row * p.dv, v + (kv + j) * p.dv, p.dv);
      const C ds = prob * (dprob - delta[row]) * scale;
      for (int64_t c = 0; c < p.d; ++c) acc[c] += ds * static_cast<C>(Load(kj[c]));
    }
  }
}

template <typename T, typename C>
__global__ void DkDvKernel(const T* q, const T* k, const T* v, const T* dout, const C* row_lse,
                           const C* delta, C* dk, C* dv, GradProblem p) {
  const int64_t kv_rows = p.batch * p.kv_heads * p.skv;
  const C scale = static_cast<C>(p.scale);
  for (int64_t kv_row = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; kv_row < kv_rows;
       kv_row += int64_t{gridDim.x} * blockDim.x) {
    const int64_t j = kv_row % p.skv;
    const int64_t bkv = kv_row / p.skv;  // b * kv_heads + kv head
    const int64_t b = bkv / p.kv_heads, kvh = bkv % p.kv_heads;
    const T* kj = k + kv_row * p.d;
    const T* vj = v + kv_row * p.dv;
    C* dk_acc = dk + kv_row * p.d;
    C* dv_acc = dv + kv_row * p.dv;
    for (int64_t c = 0; c < p.d; ++c) dk_acc[c] = 0;
    for (int64_t c = 0; c < p.dv; ++c) dv_acc[c] = 0;
    for (int64_t h = kvh * p.group; h < (kvh + 1) * p.group; ++h) {
      for (int64_t i = 0; i < p.sq; ++i) {
        const int64_t row = (b * p.heads + h) * p.sq + i;
        if (j >= VisibleKeys(p, i) || isinf(row_lse[row])) continue;
        const T* qi = q + row * p.d;
        const T* douti = dout + row * p.dv;
        const C prob = DExp(Dot<T, C>(qi, kj, p.d) * scale - row_lse[row]);
        const C ds = prob * (Dot<T, C>(douti, vj, p.dv) - delta[row]) * scale;
        for (int64_t c = 0; c < p.d; ++c) dk_acc[c] += ds * static_cast<C>(Load(qi[c]));
        for (int64_t c = 0; c < p.dv; ++c) dv_acc[c] += prob * static_cast<C>(Load(douti[c]));
      }
    }
  }
}

template <typename T, typename C>
__global__ void StoreKernel(const C* acc, T* out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = Store<T>(acc[i]);
  }
}

template <typename T>
cudaError_t LaunchTyped(const KAttentionGradArgs& a, const GradProblem& p, cudaStream_t stream) {
  using C = ComputeOf<T>;
  const int64_t rows = p.batch * p.heads * p.sq;
  const int64_t kv_rows = p.batch * p.kv_heads * p.skv;
  const int64_t counts[] = {rows, rows, rows * p.d, kv_rows * p.d, kv_rows * p.dv};
  C* scratch[5] = {};
  cudaError_t status = cudaSuccess;
  for (int i = 0; i < 5 && status == cudaSuccess; ++i) {
    status = cudaMallocAsync(reinterpret_cast<void**>(&scratch[i]),
                             sizeof(C) * std::max<int64_t>(counts[i], 1), stream);
  }
  C *row_lse = scratch[0], *delta = scratch[1], *dq = scratch[2], *dk = scratch[3],
    *dv = scratch[4];
  const T* q = static_cast<const T*>(a.q);
  const T* k = static_cast<const T*>(a.k);
  const T* v = static_cast<const T*>(a.v);
  const T* dout = static_cast<const T*>(a.dout);
  if (status == cudaSuccess && rows > 0) {
    RowStatsKernel<T, C><<<GridFor(rows), kThreads, 0, stream>>>(
        q, k, static_cast<const T*>(a.o), a.lse, dout, row_lse, delta, p);
    DqKernel<T, C><<<GridFor(rows), kThreads, 0, stream>>>(q, k, v, dout, row_lse, delta, dq, p);
    status = cudaGetLastError();
  }
  if (status == cudaSuccess && kv_rows > 0) {
    if (rows > 0) {
      DkDvKernel<T, C><<<GridFor(kv_rows), kThreads, 0, stream>>>(q, k, v, dout, row_lse, delta,
                                                                  dk, dv, p);
    } else {  // no query: the key gradients are zero
      status = cudaMemsetAsync(dk, 0, sizeof(C) * kv_rows * p.d, stream);
      if (status == cudaSuccess) status = cudaMemsetAsync(dv, 0, sizeof(C) * kv_rows * p.dv, stream);
    }
    if (status == cudaSuccess) status = cudaGetLastError();
  }
  if (status == cudaSuccess) {
    const struct {
      const C* acc;
      void* out;
      int64_t n;
    } stores[] = {{dq, a.dq, rows * p.d}, {dk, a.dk, kv_rows * p.d}, {dv, a.dv_out, kv_rows * p.dv}};
    for (const auto& s : stores) {
      if (s.n == 0) continue;
      StoreKernel<T, C><<<GridFor(s.n), kThreads, 0, stream>>>(s.acc, static_cast<T*>(s.out), s.n);
    }
    status = cudaGetLastError();
  }
  for (C* buffer : scratch) {
    if (buffer != nullptr) cudaFreeAsync(buffer, stream);
  }
  return status;
}

}  // namespace

cudaError_t LaunchAttentionGrad(const KAttentionGradArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.heads < 0 || a.kv_heads < 0 || a.sq < 0 || a.skv < 0 || a.d < 0 ||
      a.dv < 0) {
    return cudaErrorInvalidValue;
  }
  if (a.kv_heads == 0 ? a.heads != 0 : a.heads % a.kv_heads != 0) return cudaErrorInvalidValue;
  if (a.batch == 0 || a.kv_heads == 0) return cudaSuccess;  // every result is empty
  GradProblem p{};
  p.batch = a.batch;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.sq = a.sq;
  p.skv = a.skv;
  p.d = a.d;
  p.dv = a.dv;
  p.group = a.heads / a.kv_heads;
  p.scale = a.scale;
  p.causal = a.causal;
  p.partial_keys = a.partial_keys;
  const __int128 diag = static_cast<__int128>(a.q_pos) - a.k_pos;
  p.diag = static_cast<int64_t>(
      std::clamp(diag, -(static_cast<__int128>(a.sq) + 1), static_cast<__int128>(a.skv)));
  return DispatchFloat(a.dtype, [&](auto tag) -> cudaError_t {
    return LaunchTyped<typename decltype(tag)::type>(a, p, stream);
  });
}

}  // namespace commir::cuda_kernels
