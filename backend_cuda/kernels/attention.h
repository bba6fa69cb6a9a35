// Fused attention (flash-attention style): one pass over key tiles with an f32 online
// softmax, never materialising the [Sq, Skv] score matrix.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_H_
#define COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

// Which kernel LaunchAttention runs. kAuto takes the tensor-core kernel wherever it applies
// (f16/bf16; d and dv multiples of 8 and <= 128; q, k, v and out 16-byte aligned) and the
// CUDA-core kernels elsewhere. kTensorCore and kCudaCore force one (the tests compare them);
// kTensorCore on arguments it does not handle is cudaErrorInvalidValue.
enum class KAttentionKernel { kAuto, kTensorCore, kCudaCore };

struct KAttentionArgs {
  KDType dtype = KDType::kF32;  // of q, k, v and out (f32, f16, bf16 or f64)
  const void* q = nullptr;      // [batch, heads, sq, d], contiguous
  const void* k = nullptr;      // [batch, kv_heads, skv, d]
  const void* v = nullptr;      // [batch, kv_heads, skv, dv]
  void* out = nullptr;          // [batch, heads, sq, dv]
  float* lse = nullptr;         // [batch, heads, sq] f32, or nullptr when not wanted
  int64_t batch = 0, heads = 0, kv_heads = 0, sq = 0, skv = 0, d = 0, dv = 0;
  double scale = 1.0;  // the executor resolves the default 1/sqrt(d) (1 when d == 0)
  bool causal = false;
  int64_t q_pos = 0;  // position of query 0 (the executor resolves the default skv - sq)
  int64_t k_pos = 0;  // position of key 0
  KAttentionKernel kernel = KAttentionKernel::kAuto;
};

// out = softmax(scale * q k^T, masked) v; head h reads kv head h / (heads / kv_heads).
// Under `causal` query i sees key j iff k_pos + j <= q_pos + i. lse is the natural
// log-sum-exp of the scaled, masked scores; a query that sees no key gets lse = -inf and an
// all-zero output row. Key tiles that are entirely masked for a query tile are skipped.
// heads must be a multiple of kv_heads (else cudaErrorInvalidValue).
// f16/bf16 with d, dv <= 128 (multiples of 8) run on tensor cores (attention_mma.cu):
// q k^T and p v as f16/bf16 products accumulated in f32, softmax in f32, p rounded to the
// input type before p v. Otherwise scores, softmax and p v run in f32 (f64 for f64) on
// CUDA cores: a tiled shared-memory kernel for d, dv <= 128 and a slower
// one-query-per-block kernel for larger heads and f64.
cudaError_t LaunchAttention(const KAttentionArgs& args, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_H_
