// Fused attention (attention.h): the CUDA-core kernels, and the choice between them and the
// tensor-core kernel of attention_mma.cu (f16/bf16, which production stacks run as
// FlashAttention on tensor cores).
//
// Tiled kernel (f32/f16/bf16, d and dv <= 128): a block of 128 threads owns 32 queries of
// one (batch, head) and walks the keys in tiles of 32 held in shared memory as f32. Four
// threads share each query row: each computes 8 of the row's 32 scores per tile and owns
// a quarter of the output columns. The softmax is online (running max m, running sum l,
// output rescaled by exp(m_old - m_new)), so nothing of size Skv is stored. Under the
// causal mask the visible keys of a query are a prefix, so key tiles past the last visible
// key of the tile's last query are never loaded.
//
// Fallback kernel (f64, or d / dv > 128): one block per query row, keys in chunks of 128
// (one score per thread), the output row accumulated in shared memory.
#include "backend_cuda/kernels/attention.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "backend_cuda/kernels/attention_mma.h"
#include "backend_cuda/kernels/device_math.cuh"
#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {
namespace {

constexpr int kBlockQ = 32;
constexpr int kBlockK = 32;
constexpr int kFlashThreads = 128;  // 4 threads per query row
constexpr int kRowThreads = 4;
constexpr int kKeysPerThread = kBlockK / kRowThreads;
constexpr int kFallbackThreads = 128;

struct Problem {
  int64_t batch, heads, kv_heads, sq, skv, d, dv;
  int64_t group;  // heads / kv_heads
  float scale;
  double scale_f64;
  bool causal;
  // Query i sees key j iff j < VisibleKeys(i) = clamp(diag + i + 1, 0, skv); diag is
  // q_pos - k_pos clamped (on the host, without overflow) so this stays exact.
  int64_t diag;
};

__device__ __forceinline__ int64_t VisibleKeys(const Problem& p, int64_t i) {
  if (!p.causal) return p.skv;
  const int64_t v = p.diag + i + 1;
  return v < 0 ? 0 : (v > p.skv ? p.skv : v);
}

template <typename T, int kDMax>
__global__ void __launch_bounds__(kFlashThreads)
    FlashAttentionKernel(const T* __restrict__ q, const T* __restrict__ k,
                         const T* __restrict__ v, T* __restrict__ out, float* __restrict__ lse,
                         Problem p) {
  extern __shared__ float smem[];
  constexpr int kLd = kDMax + 1;  // padded row length: rows start in different banks
  float* qs = smem;                       // [kBlockQ][kLd]
  float* ks = qs + kBlockQ * kLd;         // [kBlockK][kLd]
  float* vs = ks + kBlockK * kLd;         // [kBlockK][kLd]
  float* ps = vs + kBlockK * kLd;         // [kBlockQ][kBlockK + 1]

  const int64_t q_tiles = (p.sq + kBlockQ - 1) / kBlockQ;
  const int64_t tile = blockIdx.x;
  const int64_t qt = tile % q_tiles;
  const int64_t bh = tile / q_tiles;  // b * heads + h
  const int64_t b = bh / p.heads;
  const int64_t h = bh % p.heads;
  const int64_t kvh = b * p.kv_heads + h / p.group;
  const int64_t q0 = qt * kBlockQ;

  const int tid = threadIdx.x;
  const int r = tid / kRowThreads;     // query row within the tile
  const int lane4 = tid % kRowThreads;
  const int64_t qi = q0 + r;
  const bool row_valid = qi < p.sq;

  const T* qb = q + (bh * p.sq + q0) * p.d;
  const T* kb = k + kvh * p.skv * p.d;
  const T* vb = v + kvh * p.skv * p.dv;

  for (int64_t idx = tid; idx < kBlockQ * p.d; idx += kFlashThreads) {
    const int64_t row = idx / p.d, col = idx % p.d;
    qs[row * kLd + col] = q0 + row < p.sq ? static_cast<float>(Load(qb[idx])) : 0.0f;
  }

  const int64_t last_row = std::min<int64_t>(q0 + kBlockQ, p.sq) - 1;
  const int64_t kv_end = VisibleKeys(p, last_row);  // the tile's last query sees the most
  const int64_t row_visible = row_valid ? VisibleKeys(p, qi) : 0;

  float m = -Infinity<float>();
  float l = 0.0f;
  float o[kDMax / kRowThreads];
#pragma unroll
  for (int c = 0; c < kDMax / kRowThreads; ++c) o[c] = 0.0f;

  for (int64_t k0 = 0; k0 < kv_end; k0 += kBlockK) {
    const int64_t keys = std::min<int64_t>(kBlockK, kv_end - k0);
    __syncthreads();  // the previous tile's ks / vs are no longer read
    for (int64_t idx = tid; idx < kBlockK * p.d; idx += kFlashThreads) {
      const int64_t row = idx / p.d, col = idx % p.d;
      ks[row * kLd + col] = row < keys ? static_cast<float>(Load(kb[(k0 + row) * p.d + col])) : 0.0f;
    }
    for (int64_t idx = tid; idx < kBlockK * p.dv; idx += kFlashThreads) {
      const int64_t row = idx / p.dv, col = idx % p.dv;
      vs[row * kLd + col] =
          row < keys ? static_cast<float>(Load(vb[(k0 + row) * p.dv + col])) : 0.0f;
    }
    __syncthreads();

    float s[kKeysPerThread];
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) s[j] = 0.0f;
    for (int64_t c = 0; c < p.d; ++c) {
      const float qv = qs[r * kLd + c];
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) s[j] += qv * ks[(lane4 + kRowThreads * j) * kLd + c];
    }
    float tile_max = -Infinity<float>();
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) {
      const int64_t key = k0 + lane4 + kRowThreads * j;
      s[j] = key < row_visible ? s[j] * p.scale : -Infinity<float>();
      tile_max = fmaxf(tile_max, s[j]);
    }
    tile_max = WarpReduce(tile_max, MaxOp{}, kRowThreads);
    const float m_new = fmaxf(m, tile_max);
    float alpha = 1.0f;
    float row_sum = 0.0f;
    if (m_new != -Infinity<float>()) {
      alpha = expf(m - m_new);  // 0 while nothing was visible (m = -inf)
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) {
        s[j] = expf(s[j] - m_new);  // masked: exp(-inf) = 0
        row_sum += s[j];
      }
    } else {
#pragma unroll
      for (int j = 0; j < kKeysPerThread; ++j) s[j] = 0.0f;
    }
    row_sum = WarpReduce(row_sum, AddOp{}, kRowThreads);
    m = m_new;
    l = l * alpha + row_sum;
#pragma unroll
    for (int j = 0; j < kKeysPerThread; ++j) ps[r * (kBlockK + 1) + lane4 + kRowThreads * j] = s[j];
    __syncwarp();  // a row's four threads sit in one warp
#pragma unroll
    for (int c = 0; c < kDMax / kRowThreads; ++c) {
      const int col = lane4 + kRowThreads * c;
      if (col >= p.dv) break;
      float acc = o[c] * alpha;
      for (int j = 0; j < keys; ++j) acc += ps[r * (kBlockK + 1) + j] * vs[j * kLd + col];
      o[c] = acc;
    }
    __syncwarp();  // ps is rewritten by the next tile
  }

  if (!row_valid) return;
  // l is 0 only when no key was visible; a NaN score must still give NaN, not zeros.
  const bool any = !(l == 0.0f);
  const float inv_l = any ? 1.0f / l : 0.0f;
  T* orow = out + (bh * p.sq + qi) * p.dv;
#pragma unroll
  for (int c = 0; c < kDMax / kRowThreads; ++c) {
    const int col = lane4 + kRowThreads * c;
    if (col >= p.dv) break;
    orow[col] = Store<T>(any ? o[c] * inv_l : 0.0f);
  }
  if (lse != nullptr && lane4 == 0) lse[bh * p.sq + qi] = any ? m + logf(l) : -Infinity<float>();
}

template <typename T>
__global__ void __launch_bounds__(kFallbackThreads)
    AttentionRowKernel(const T* __restrict__ q, const T* __restrict__ k,
                       const T* __restrict__ v, T* __restrict__ out, float* __restrict__ lse,
                       Problem p) {
  using C = ComputeOf<T>;
  extern __shared__ unsigned char raw_smem[];
  C* qrow = reinterpret_cast<C*>(raw_smem);  // [d]
  C* acc = qrow + p.d;                        // [dv]
  C* probs = acc + p.dv;                      // [kFallbackThreads]
  C* scratch = probs + kFallbackThreads;      // [32]
  const C scale = std::is_same_v<C, double> ? static_cast<C>(p.scale_f64) : static_cast<C>(p.scale);
  const int tid = threadIdx.x;
  const int64_t rows = p.batch * p.heads * p.sq;
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const int64_t bh = row / p.sq;
    const int64_t qi = row % p.sq;
    const int64_t b = bh / p.heads, h = bh % p.heads;
    const int64_t kvh = b * p.kv_heads + h / p.group;
    const T* kb = k + kvh * p.skv * p.d;
    const T* vb = v + kvh * p.skv * p.dv;
    __syncthreads();  // the previous row's shared data is no longer read
    for (int64_t c = tid; c < p.d; c += kFallbackThreads) qrow[c] = Load(q[row * p.d + c]);
    for (int64_t c = tid; c < p.dv; c += kFallbackThreads) acc[c] = C{0};
    __syncthreads();
    const int64_t visible = VisibleKeys(p, qi);
    C m = -Infinity<C>();
    C l = 0;
    for (int64_t k0 = 0; k0 < visible; k0 += kFallbackThreads) {
      const int64_t key = k0 + tid;
      C s = -Infinity<C>();
      if (key < visible) {
        C dot = 0;
        for (int64_t c = 0; c < p.d; ++c) dot += qrow[c] * Load(kb[key * p.d + c]);
        s = dot * scale;
      }
      const C m_new = MaxNan(m, BlockReduce(s, MaxOp{}, scratch));
      const C alpha = DExp(m - m_new);
      const C e = key < visible ? DExp(s - m_new) : C{0};
      const C chunk_sum = BlockReduce(e, AddOp{}, scratch);
      probs[tid] = e;
      __syncthreads();
      const int64_t keys = std::min<int64_t>(kFallbackThreads, visible - k0);
      for (int64_t c = tid; c < p.dv; c += kFallbackThreads) {
        C a = acc[c] * alpha;
        for (int64_t j = 0; j < keys; ++j) a += probs[j] * Load(vb[(k0 + j) * p.dv + c]);
        acc[c] = a;
      }
      m = m_new;
      l = l * alpha + chunk_sum;
      __syncthreads();  // probs is rewritten by the next chunk
    }
    const bool any = !(l == C{0});
    for (int64_t c = tid; c < p.dv; c += kFallbackThreads) {
      out[row * p.dv + c] = Store<T>(any ? acc[c] / l : C{0});
    }
    if (lse != nullptr && tid == 0) {
      lse[row] = any ? static_cast<float>(m + DLog(l)) : -Infinity<float>();
    }
  }
}

template <typename T, int kDMax>
cudaError_t LaunchFlash(const KAttentionArgs& a, const Problem& p, cudaStream_t stream) {
  constexpr size_t kSmem =
      sizeof(float) * ((kBlockQ + 2 * kBlockK) * (kDMax + 1) + kBlockQ * (kBlockK + 1));
  // Above 48 KiB dynamic shared memory needs an opt-in, once per device.
  static std::atomic<bool> opted_in[64] = {};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const bool cached = device >= 0 && device < 64 && opted_in[device].load(std::memory_order_acquire);
  if (kSmem > 48 * 1024 && !cached) {
    if (cudaError_t e = cudaFuncSetAttribute(FlashAttentionKernel<T, kDMax>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kSmem));
        e != cudaSuccess) {
      return e;
    }
    if (device >= 0 && device < 64) opted_in[device].store(true, std::memory_order_release);
  }
  const int64_t blocks = (p.sq + kBlockQ - 1) / kBlockQ * p.batch * p.heads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  FlashAttentionKernel<T, kDMax><<<static_cast<unsigned>(blocks), kFlashThreads, kSmem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<T*>(a.out), a.lse, p);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchRowFallback(const KAttentionArgs& a, const Problem& p, cudaStream_t stream) {
  using C = ComputeOf<T>;
  const size_t smem = sizeof(C) * (p.d + p.dv + kFallbackThreads + 32);
  int device = 0, max_smem = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (cudaError_t e =
          cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
      e != cudaSuccess) {
    return e;
  }
  if (smem > static_cast<size_t>(max_smem)) return cudaErrorInvalidValue;  // huge heads
  if (smem > 48 * 1024) {
    if (cudaError_t e = cudaFuncSetAttribute(AttentionRowKernel<T>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(smem));
        e != cudaSuccess) {
      return e;
    }
  }
  const int64_t rows = p.batch * p.heads * p.sq;
  const int blocks = GridFor(rows * kFallbackThreads, kFallbackThreads);
  AttentionRowKernel<T><<<blocks, kFallbackThreads, smem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<T*>(a.out), a.lse, p);
  return cudaGetLastError();
}

}  // namespace

cudaError_t LaunchAttention(const KAttentionArgs& a, cudaStream_t stream) {
  if (a.batch < 0 || a.heads < 0 || a.kv_heads < 0 || a.sq < 0 || a.skv < 0 || a.d < 0 ||
      a.dv < 0) {
    return cudaErrorInvalidValue;
  }
  if (a.kv_heads == 0 ? a.heads != 0 : a.heads % a.kv_heads != 0) return cudaErrorInvalidValue;
  const bool tensor_cores = a.kernel != KAttentionKernel::kCudaCore && AttentionMmaSupports(a);
  if (a.kernel == KAttentionKernel::kTensorCore && !tensor_cores) return cudaErrorInvalidValue;
  if (a.batch == 0 || a.heads == 0 || a.sq == 0) return cudaSuccess;
  Problem p{};
  p.batch = a.batch;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.sq = a.sq;
  p.skv = a.skv;
  p.d = a.d;
  p.dv = a.dv;
  p.group = a.heads / a.kv_heads;
  p.scale = static_cast<float>(a.scale);
  p.scale_f64 = a.scale;
  p.causal = a.causal;
  // q_pos - k_pos in 128 bits, clamped to a range where VisibleKeys is unchanged.
  const __int128 diag = static_cast<__int128>(a.q_pos) - a.k_pos;
  const __int128 lo = -(static_cast<__int128>(a.sq) + 1);
  const __int128 hi = a.skv;
  p.diag = static_cast<int64_t>(std::clamp(diag, lo, hi));
  if (tensor_cores) return LaunchAttentionMma(a, p.diag, stream);

  if (a.dtype == KDType::kF64) return LaunchRowFallback<double>(a, p, stream);
  return DispatchFloat(a.dtype, [&](auto tag) -> cudaError_t {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_same_v<T, double>) {
      return cudaErrorInvalidValue;  // handled above
    } else {
      const int64_t widest = std::max(a.d, a.dv);
      if (widest <= 64) return LaunchFlash<T, 64>(a, p, stream);
      if (widest <= 128) return LaunchFlash<T, 128>(a, p, stream);
      return LaunchRowFallback<T>(a, p, stream);
    }
  });
}

}  // namespace commir::cuda_kernels
