// Attention's backward (attention_grad): dq, dk, dv from q, k, v, o, lse and dout.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_GRAD_H_
#define COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_GRAD_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

struct KAttentionGradArgs {
  KDType dtype = KDType::kF32;  // of q, k, v, o, dout and the three results
  const void* q = nullptr;      // [batch, heads, sq, d], contiguous
  const void* k = nullptr;      // [batch, kv_heads, skv, d]
  const void* v = nullptr;      // [batch, kv_heads, skv, dv]
  const void* o = nullptr;      // [batch, heads, sq, dv]: the forward's output
  const float* lse = nullptr;   // [batch, heads, sq]: the forward's log-sum-exp
  const void* dout = nullptr;   // [batch, heads, sq, dv]
  void* dq = nullptr;           // like q
  void* dk = nullptr;           // like k
  void* dv_out = nullptr;       // like v
  int64_t batch = 0, heads = 0, kv_heads = 0, sq = 0, skv = 0, d = 0, dv = 0;
  double scale = 1.0;  // resolved by the executor, as for attention
  bool causal = false;
  // lse normalises over a superset of these keys (attention_grad's partial_keys): the
  // probabilities exp(s - lse) are used without renormalising their rows.
  bool partial_keys = false;
  int64_t q_pos = 0;  // resolved by the executor (default skv - sq)
  int64_t k_pos = 0;
};

// The cpu kernel's definition (backend_cpu/kernels.h, AttentionGrad): probabilities from
// the recomputed scores and lse, renormalised per row (unless partial_keys); ds = p (dp - rowsum(dout o)) scale;
// dq = ds k, dk = ds^T q and dv = p^T dout summed over each kv head's query heads. A
// straightforward kernel (one thread per query row for dq, per key row for dk and dv,
// scores recomputed by each), accumulating in f32 (f64 for f64) in stream-ordered scratch.
// heads must be a multiple of kv_heads (else cudaErrorInvalidValue).
cudaError_t LaunchAttentionGrad(const KAttentionGradArgs& args, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_GRAD_H_
