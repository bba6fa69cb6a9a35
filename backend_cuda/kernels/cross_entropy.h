// cross_entropy and cross_entropy_grad (commir/cross_entropy_op.h has the formulas).
//
// One 256-thread block per row of logits: the forward reads the row once for its
// maximum and once more, from L1/L2, for its sum of exponentials, target logit and (with
// label smoothing) its distance to the maximum; the backward reads the row and writes
// dlogits once. Statistics in f32 (f64 for f64); sums are block trees, so results agree
// with the cpu backend's pairwise sums to a few ulp, not bit for bit. Launch-only.
#ifndef COMMIR_BACKEND_CUDA_KERNELS_CROSS_ENTROPY_H_
#define COMMIR_BACKEND_CUDA_KERNELS_CROSS_ENTROPY_H_

#include <cuda_runtime.h>

#include <cstdint>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

struct KCrossEntropyArgs {
  KDType dtype = KDType::kF32;        // the logits' (float)
  KDType label_dtype = KDType::kI64;  // i32 or i64
  const void* logits = nullptr;       // [tokens, classes]
  const void* labels = nullptr;       // [tokens]
  int64_t tokens = 0;
  int64_t classes = 0;
  // 0: mean over the tokens not ignored, 1: sum, 2: none (one loss per token).
  int reduction = 0;
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  double z_loss = 0;
  // The vocabulary-parallel form (commir/cross_entropy_op.h): the logits are the classes
  // [offset, offset + classes) of `vocab` in all (0: `classes`, the unsharded op), and
  // the forward reads the whole vocabulary's lse (statistics' type) from `lse_in`.
  int64_t offset = 0;
  int64_t vocab = 0;
  const void* lse_in = nullptr;
};

// loss: a scalar (mean, sum) or [tokens] (none) of the logits' type; lse: [tokens] in f32
// (f64 for f64). `token_losses` is a [tokens] scratch buffer of the statistics' type. A label neither in [0, classes) nor ignore_index raises
// kErrLabelOutOfRange and its token's loss is 0. With lse_in: the shard's share of the
// loss, and lse_in copied to lse.
cudaError_t LaunchCrossEntropy(const KCrossEntropyArgs& args, void* loss, void* lse,
                               void* token_losses, int32_t* error_flag, cudaStream_t stream);

// dlogits [tokens, classes] of dloss's (float) type, from the forward's lse and dloss (a
// scalar, or [tokens] for none).
cudaError_t LaunchCrossEntropyGrad(const KCrossEntropyArgs& args, const void* lse,
                                   KDType dloss_dtype, const void* dloss, void* dlogits,
                                   int32_t* error_flag, cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_CROSS_ENTROPY_H_
