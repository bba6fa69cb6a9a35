// Tensor-core attention forward (attention_mma.h), the FlashAttention-2 algorithm.
//
// A block of 4 warps owns 128 queries of one (batch, head); each warp owns 32 of them as
// two m16 tiles, so each K / V fragment read from shared memory feeds two mma, and keeps
// their output accumulator and softmax state in registers (q fragments are re-read from
// shared memory per key tile). The block walks the keys in tiles (64 keys at head size 64,
// 32 at 128: MmaConfig) that cp.async copies into a double-buffered
// shared-memory ring (tile t + 1 is in flight while tile t is computed). Per tile a warp
// computes S = Q K^T with mma.sync m16n8k16 (f16/bf16 inputs, f32 accumulation), scales it
// into the log2 domain, updates the running row max m and row sum l (online softmax:
// earlier output rescaled by 2^(m_old - m_new)), rounds P = 2^(S - m) to the input type
// and accumulates O += P V with the same instruction. K fragments come from shared memory
// through ldmatrix, V fragments through ldmatrix.trans; rows are padded by 16 bytes so the
// eight rows an ldmatrix reads fall into distinct banks.
//
// Causal mask: the keys a query sees are a prefix, so the block stops at the last key its
// last query sees, a warp skips the tiles none of its rows see, and only tiles that cross
// the visibility edge of some row of the warp are masked element by element.
//
// Blocks are numbered heaviest query tile first (the last tiles of every head see the most
// keys under the causal mask), so the tail of the grid is made of short blocks.
#include "backend_cuda/kernels/attention_mma.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {
namespace {

constexpr int kStages = 2;            // K/V tiles in shared memory (one computed, one loading)

constexpr double kLog2e = 1.4426950408889634;
constexpr float kLn2 = 0.6931471805599453f;

struct MmaProblem {
  int64_t batch_heads;  // batch * heads
  int64_t heads, kv_heads, group;
  int64_t sq, skv, d, dv;
  int64_t q_tiles;  // blocks per (batch, head), set by Launch
  int64_t diag;      // clamped q_pos - k_pos
  float scale_log2;  // scale * log2(e): scores go straight into exp2
  bool causal;
};

// Query i sees key j iff j < VisibleKeys(i) (also for i >= sq: those rows are not stored).
__device__ __forceinline__ int64_t VisibleKeys(const MmaProblem& p, int64_t i) {
  if (!p.causal) return p.skv;
  const int64_t v = p.diag + i + 1;
  return v < 0 ? 0 : (v > p.skv ? p.skv : v);
}

// Two floats rounded (nearest even) into one register of two f16/bf16, the lower column
// in the lower half, as mma's A fragments and the output stores want them.
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi) {
  uint32_t bits;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    memcpy(&bits, &v, sizeof(bits));
  } else {
    const __half2 v = __floats2half2_rn(lo, hi);
    memcpy(&bits, &v, sizeof(bits));
  }
  return bits;
}

// d += a b for one 16x8x16 tile: a row-major 16x16 (4 registers), b 16x8 with k contiguous
// per column (2 registers), d 16x8 f32.
template <typename T>
__device__ __forceinline__ void Mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ uint32_t SmemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i
// receives matrix i (lane t: row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1).
__device__ __forceinline__ void LdMatrixX4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// The same, each matrix transposed (lane t: rows 2 (t % 4) and 2 (t % 4) + 1, column t / 4).
__device__ __forceinline__ void LdMatrixX4Trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// 16 bytes global -> shared without staging in registers; !valid writes 16 zero bytes and
// reads nothing.
__device__ __forceinline__ void CpAsync16(uint32_t smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void CpAsyncWaitAll() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}


// The shape a padded head size runs with: warps per block, m16 tiles per warp (each K / V
// fragment read from shared memory feeds kMTiles mma), the blocks per SM that
// __launch_bounds__ reserves registers for, and the keys per shared-memory tile.
// Chosen by timing on an H200 (bf16, B=1 H=32 S=4096 at 128, B=4 H=32 S=2048 at 64): at 64,
// two m16 tiles per warp with 64-key tiles gave 200 TFLOP/s causal against 161 for one
// tile; at 128, 64-key tiles leave no registers for two m16 tiles (spills), and two tiles
// with 32-key tiles gave 233 / 242 TFLOP/s (causal / not) against 219 / 222 for 8 warps of
// one tile with 64-key tiles.
template <int kD>
struct MmaConfig;
template <>
struct MmaConfig<64> {
  static constexpr int kBlockN = 64;
  static constexpr int kWarps = 4;
  static constexpr int kMTiles = 2;
  static constexpr int kMinBlocks = 2;
};
template <>
struct MmaConfig<128> {
  static constexpr int kBlockN = 32;
  static constexpr int kWarps = 4;
  static constexpr int kMTiles = 2;
  static constexpr int kMinBlocks = 2;
};

// Queries per block: kMTiles m16 tiles per warp.
template <typename Cfg>
constexpr int BlockM() {
  return 16 * Cfg::kWarps * Cfg::kMTiles;
}

template <int kD, typename Cfg>
constexpr size_t SmemBytes() {
  constexpr int kLd = kD + 8;
  return sizeof(uint16_t) * (BlockM<Cfg>() + 2 * kStages * Cfg::kBlockN) * kLd;
}

// kD is the padded head size (64 or 128) of both q/k (d) and v (dv); columns past d or dv
// are zero in shared memory, so they add exact zeros to the scores and are not stored.
template <typename T, int kD, typename Cfg = MmaConfig<kD>>
__global__ void __launch_bounds__(32 * Cfg::kWarps, Cfg::kMinBlocks)
    FlashMmaKernel(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                   T* __restrict__ out, float* __restrict__ lse, MmaProblem p) {
  constexpr int kWarps = Cfg::kWarps;
  constexpr int kMTiles = Cfg::kMTiles;
  constexpr int kThreads = 32 * kWarps;
  constexpr int kBlockM = BlockM<Cfg>();
  constexpr int kBlockN = Cfg::kBlockN;  // keys per shared-memory tile
  constexpr int kWarpRows = 16 * kMTiles;
  constexpr int kLd = kD + 8;       // padded row (elements); 16-byte multiple
  constexpr int kChunks = kD / 8;   // 16-byte chunks per row
  constexpr int kNTiles = kBlockN / 8;
  constexpr int kDTiles = kD / 8;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* qs = reinterpret_cast<T*>(smem_raw);  // [kBlockM][kLd]
  T* ks = qs + kBlockM * kLd;              // [kStages][kBlockN][kLd]
  T* vs = ks + kStages * kBlockN * kLd;    // [kStages][kBlockN][kLd]

  const int64_t tile = blockIdx.x;
  const int64_t qt = p.q_tiles - 1 - tile / p.batch_heads;
  const int64_t bh = tile % p.batch_heads;  // b * heads + h
  const int64_t b = bh / p.heads;
  const int64_t h = bh % p.heads;
  const int64_t kvh = b * p.kv_heads + h / p.group;
  const int64_t q0 = qt * kBlockM;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;

  const T* qb = q + bh * p.sq * p.d;
  const T* kb = k + kvh * p.skv * p.d;
  const T* vb = v + kvh * p.skv * p.dv;

  // The block's last query sees the most keys; tiles past kv_end are never loaded.
  const int64_t kv_end = VisibleKeys(p, std::min<int64_t>(q0 + kBlockM, p.sq) - 1);
  const int64_t n_tiles = (kv_end + kBlockN - 1) / kBlockN;

  // Keys at or past kv_end are zero-filled too: a masked p = 0 then never meets an inf or
  // NaN of a key no query of the block sees.
  auto load_kv = [&](int64_t t, int stage) {
    const int64_t k0 = t * kBlockN;
    T* kd = ks + stage * kBlockN * kLd;
    T* vd = vs + stage * kBlockN * kLd;
    static_assert(kBlockN * kChunks % kThreads == 0);
#pragma unroll
    for (int i = 0; i < kBlockN * kChunks / kThreads; ++i) {
      const int idx = tid + i * kThreads;
      const int row = idx / kChunks;
      const int c = idx % kChunks;
      const int64_t key = k0 + row;
      const bool in = key < kv_end;
      const bool k_ok = in && c * 8 < p.d;
      const bool v_ok = in && c * 8 < p.dv;
      CpAsync16(SmemAddr(kd + row * kLd + c * 8), k_ok ? kb + key * p.d + c * 8 : kb, k_ok);
      CpAsync16(SmemAddr(vd + row * kLd + c * 8), v_ok ? vb + key * p.dv + c * 8 : vb, v_ok);
    }
  };

  static_assert(kBlockM * kChunks % kThreads == 0);
#pragma unroll
  for (int i = 0; i < kBlockM * kChunks / kThreads; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx / kChunks;
    const int c = idx % kChunks;
    const int64_t qi = q0 + row;
    const bool ok = qi < p.sq && c * 8 < p.d;
    CpAsync16(SmemAddr(qs + row * kLd + c * 8), ok ? qb + qi * p.d + c * 8 : qb, ok);
  }
  if (n_tiles > 0) load_kv(0, 0);
  CpAsyncCommit();

  // This warp's rows: w_row0 .. w_row0 + kWarpRows - 1, in m16 tiles mt; this lane holds
  // rows w_row0 + 16 mt + lane / 4 (index [mt][0]) and the row 8 below ([mt][1]).
  const int64_t w_row0 = q0 + kWarpRows * warp;
  const bool warp_active = w_row0 < p.sq;
  // Every row of the warp sees the keys below w_vis_first; none sees those from w_vis_last.
  const int64_t w_vis_first = VisibleKeys(p, w_row0);
  const int64_t w_vis_last =
      VisibleKeys(p, std::min<int64_t>(w_row0 + kWarpRows - 1, p.sq - 1));
  int64_t vis[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    vis[mt][0] = VisibleKeys(p, w_row0 + 16 * mt + lane / 4);
    vis[mt][1] = VisibleKeys(p, w_row0 + 16 * mt + lane / 4 + 8);
  }

  // A fragments of m16 tile mt, k16 step kk: matrix i = rows 8 (i % 2).., columns
  // 16 kk + 8 (i / 2)..
  auto load_q = [&](uint32_t (&frag)[4], int mt, int kk) {
    const int row = kWarpRows * warp + 16 * mt + (lane % 8) + 8 * ((lane / 8) % 2);
    const int col = 16 * kk + 8 * (lane / 16);
    LdMatrixX4(frag, SmemAddr(qs + row * kLd + col));
  };
  // q fragments of the current k16 step, re-read from shared memory per key tile: kept in
  // registers for the whole loop they would crowd out the accumulators.
  uint32_t qf[kMTiles][4];

  float o[kMTiles][kDTiles][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int j = 0; j < kDTiles; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;
  }
  // Running max (log2 domain, of the scaled scores) and this lane's part of the row sum;
  // the four lanes of a row agree on m, so their partial sums are rescaled alike.
  float m[kMTiles][2], l[kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
    m[mt][0] = m[mt][1] = kNegInf;
    l[mt][0] = l[mt][1] = 0.0f;
  }

  for (int64_t t = 0; t < n_tiles; ++t) {
    CpAsyncWaitAll();
    __syncthreads();  // tile t (and q) visible to all; tile t - 1's buffer no longer read
    if (t + 1 < n_tiles) load_kv(t + 1, static_cast<int>((t + 1) % kStages));
    CpAsyncCommit();

    const int64_t k0 = t * kBlockN;
    if (!warp_active || k0 >= w_vis_last) continue;  // no row of this warp sees the tile
    const int stage = static_cast<int>(t % kStages);
    const T* kt = ks + stage * kBlockN * kLd;
    const T* vt = vs + stage * kBlockN * kLd;

    // S = Q K^T: s[mt][j] is the 16 x 8 tile of m16 tile mt and keys 8 j .. 8 j + 7.
    float s[kMTiles][kNTiles][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) s[mt][j][0] = s[mt][j][1] = s[mt][j][2] = s[mt][j][3] = 0.0f;
    }
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) load_q(qf[mt], mt, kk);
#pragma unroll
      for (int np = 0; np < kNTiles / 2; ++np) {
        // matrix i = keys 16 np + 8 (i / 2).., columns 16 kk + 8 (i % 2)..: registers 0, 1
        // are the B fragment of key tile 2 np, registers 2, 3 that of 2 np + 1.
        uint32_t bf[4];
        const int key = 16 * np + (lane % 8) + 8 * (lane / 16);
        const int col = 16 * kk + 8 * ((lane / 8) % 2);
        LdMatrixX4(bf, SmemAddr(kt + key * kLd + col));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          Mma16816<T>(s[mt][2 * np], qf[mt], bf[0], bf[1]);
          Mma16816<T>(s[mt][2 * np + 1], qf[mt], bf[2], bf[3]);
        }
      }
    }

    // Scale into the log2 domain; mask where the tile crosses some row's visibility edge
    // (the causal diagonal, or the end of the keys).
    const bool need_mask = k0 + kBlockN > w_vis_first;
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[mt][j][e] * p.scale_log2;
          if (need_mask) {
            const int64_t key = k0 + 8 * j + 2 * (lane % 4) + (e & 1);
            if (key >= vis[mt][e / 2]) x = kNegInf;
          }
          s[mt][j][e] = x;
        }
      }
    }

    // Online softmax, row by row (r = 0: c0, c1; r = 1: c2, c3 of each tile). fmaxf ignores
    // NaN, so m is never NaN and a NaN score reaches the output through p = exp2(NaN)
    // instead. While a row has seen nothing visible its max is -inf; subtracting 0 instead
    // keeps exp2(-inf - m) = 0 rather than NaN.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = m[mt][r];
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) mx = fmaxf(mx, fmaxf(s[mt][j][2 * r], s[mt][j][2 * r + 1]));
#pragma unroll
        for (int offset = 1; offset < 4; offset *= 2) {  // the four lanes of a row
          mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, offset));
        }
        const float use = mx == kNegInf ? 0.0f : mx;
        const float alpha = exp2f(m[mt][r] - use);  // 0 while nothing was visible
        m[mt][r] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
          s[mt][j][2 * r] = exp2f(s[mt][j][2 * r] - use);
          s[mt][j][2 * r + 1] = exp2f(s[mt][j][2 * r + 1] - use);
          sum += s[mt][j][2 * r] + s[mt][j][2 * r + 1];
        }
        l[mt][r] = l[mt][r] * alpha + sum;
#pragma unroll
        for (int j = 0; j < kDTiles; ++j) {
          o[mt][j][2 * r] *= alpha;
          o[mt][j][2 * r + 1] *= alpha;
        }
      }
    }

    // O += P V. The accumulator layout of S tiles 2 kk, 2 kk + 1 is the A layout of the
    // 16 x 16 P block of keys 16 kk..; matrix i of V = keys 16 kk + 8 (i % 2)..,
    // columns 16 np + 8 (i / 2).., transposed into B fragments.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      uint32_t pa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        pa[mt][0] = PackPair<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);
        pa[mt][1] = PackPair<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);
        pa[mt][2] = PackPair<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
        pa[mt][3] = PackPair<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
      }
#pragma unroll
      for (int np = 0; np < kDTiles / 2; ++np) {
        uint32_t bf[4];
        const int key = 16 * kk + (lane % 8) + 8 * ((lane / 8) % 2);
        const int col = 16 * np + 8 * (lane / 16);
        LdMatrixX4Trans(bf, SmemAddr(vt + key * kLd + col));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          Mma16816<T>(o[mt][2 * np], pa[mt], bf[0], bf[1]);
          Mma16816<T>(o[mt][2 * np + 1], pa[mt], bf[2], bf[3]);
        }
      }
    }
  }

  // Whole-row sums; l is 0 only when the row saw no key (a NaN score makes it NaN).
  T* ob = out + bh * p.sq * p.dv;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mt][r];
#pragma unroll
      for (int offset = 1; offset < 4; offset *= 2) {
        sum += __shfl_xor_sync(0xffffffffu, sum, offset);
      }
      const int64_t row = w_row0 + 16 * mt + lane / 4 + 8 * r;
      if (row >= p.sq) continue;
      const bool any = !(sum == 0.0f);
      const float inv = any ? 1.0f / sum : 0.0f;
#pragma unroll
      for (int j = 0; j < kDTiles; ++j) {
        const int col = 8 * j + 2 * (lane % 4);
        if (col >= p.dv) break;  // dv is a multiple of 8: pairs are wholly in or out
        *reinterpret_cast<uint32_t*>(ob + row * p.dv + col) =
            PackPair<T>(any ? o[mt][j][2 * r] * inv : 0.0f, any ? o[mt][j][2 * r + 1] * inv : 0.0f);
      }
      // Natural log-sum-exp: m is in the log2 domain.
      if (lse != nullptr && lane % 4 == 0) {
        lse[bh * p.sq + row] = any ? m[mt][r] * kLn2 + logf(sum) : kNegInf;
      }
    }
  }
}

int PaddedHead(const KAttentionArgs& a) {
  const int64_t widest = std::max(a.d, a.dv);
  return widest <= 64 ? 64 : 128;
}

bool Aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T, int kD, typename Cfg = MmaConfig<kD>>
cudaError_t Launch(const KAttentionArgs& a, MmaProblem p, cudaStream_t stream) {
  constexpr int kWarps = Cfg::kWarps;
  constexpr size_t kSmem = SmemBytes<kD, Cfg>();
  constexpr auto kKernel = FlashMmaKernel<T, kD, Cfg>;
  constexpr int kBlockM = BlockM<Cfg>();
  static_assert(sizeof(T) == sizeof(uint16_t));
  // Above 48 KiB of dynamic shared memory needs an opt-in, once per device.
  static std::atomic<bool> opted_in[64] = {};
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  const bool cached =
      device >= 0 && device < 64 && opted_in[device].load(std::memory_order_acquire);
  if (kSmem > 48 * 1024 && !cached) {
    if (cudaError_t e = cudaFuncSetAttribute(kKernel,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                             static_cast<int>(kSmem));
        e != cudaSuccess) {
      return e;
    }
    if (device >= 0 && device < 64) opted_in[device].store(true, std::memory_order_release);
  }
  p.q_tiles = (p.sq + kBlockM - 1) / kBlockM;
  const int64_t blocks = p.q_tiles * p.batch_heads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  kKernel<<<static_cast<unsigned>(blocks), 32 * kWarps, kSmem, stream>>>(
      static_cast<const T*>(a.q), static_cast<const T*>(a.k), static_cast<const T*>(a.v),
      static_cast<T*>(a.out), a.lse, p);
  return cudaGetLastError();
}

}  // namespace

bool AttentionMmaSupports(const KAttentionArgs& a) {
  if (a.dtype != KDType::kF16 && a.dtype != KDType::kBF16) return false;
  if (a.d % 8 != 0 || a.dv % 8 != 0 || a.d > 128 || a.dv > 128) return false;
  if (!Aligned16(a.q) || !Aligned16(a.k) || !Aligned16(a.v) || !Aligned16(a.out)) return false;
  int device = 0, max_smem = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&max_smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess) {
    return false;
  }
  const size_t need = PaddedHead(a) == 64 ? SmemBytes<64, MmaConfig<64>>()
                                          : SmemBytes<128, MmaConfig<128>>();
  return need <= static_cast<size_t>(max_smem);
}

cudaError_t LaunchAttentionMma(const KAttentionArgs& a, int64_t diag, cudaStream_t stream) {
  MmaProblem p{};
  p.batch_heads = a.batch * a.heads;
  p.heads = a.heads;
  p.kv_heads = a.kv_heads;
  p.group = a.heads / a.kv_heads;
  p.sq = a.sq;
  p.skv = a.skv;
  p.d = a.d;
  p.dv = a.dv;
  p.diag = diag;
  p.scale_log2 = static_cast<float>(a.scale * kLog2e);
  p.causal = a.causal;
  const bool bf16 = a.dtype == KDType::kBF16;
  if (PaddedHead(a) == 64) {
    return bf16 ? Launch<__nv_bfloat16, 64>(a, p, stream) : Launch<__half, 64>(a, p, stream);
  }
  return bf16 ? Launch<__nv_bfloat16, 128>(a, p, stream) : Launch<__half, 128>(a, p, stream);
}

}  // namespace commir::cuda_kernels
