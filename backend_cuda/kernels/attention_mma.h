// Tensor-core attention forward (FlashAttention-2 algorithm) for f16/bf16: the fast path
// of LaunchAttention (attention.h). Included only by attention.cu and attention_mma.cu.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_MMA_H_
#define COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_MMA_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "backend_cuda/kernels/attention.h"

namespace commir::cuda_kernels {

// Whether LaunchAttentionMma handles `a`: f16 or bf16; d and dv multiples of 8 and at most
// 128 (smaller heads are zero-padded to 64 or 128, which leaves every dot product exact);
// q, k, v and out 16-byte aligned (cp.async moves 16-byte chunks); the current device
// grants the kernel's shared memory. Sizes must already be validated (non-negative,
// heads a multiple of kv_heads).
bool AttentionMmaSupports(const KAttentionArgs& a);

// Launches the kernel on arguments AttentionMmaSupports accepted, with batch, heads and sq
// non-zero. `diag` is q_pos - k_pos clamped to [-(sq + 1), skv] (attention.cu), so query i
// sees key j under the causal mask iff j < clamp(diag + i + 1, 0, skv).
cudaError_t LaunchAttentionMma(const KAttentionArgs& a, int64_t diag, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_MMA_H_
