// The online-softmax merge of partial attention results (attention_merge): one kernel
// folds up to kMaxMergePartials partials into the accumulator, with the arithmetic of
// commir/online_softmax.h (the cpu backend's AttentionMerge runs the same steps).
#ifndef COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_MERGE_H_
#define COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_MERGE_H_

#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "backend_cuda/kernels/dtype.h"

namespace commir::cuda_kernels {

// Partials one launch takes (passed by value in the kernel's arguments); more are merged
// by further launches on the result, in order, which rounds exactly as one fold does.
inline constexpr int kMaxMergePartials = 8;

// One partial result: o [rows, width] of o_type, lse [rows] of lse_type (any float types;
// widened exactly on load).
struct KMergePartial {
  const void* o = nullptr;
  const void* lse = nullptr;
  KDType o_type = KDType::kF32;
  KDType lse_type = KDType::kF32;
};

// (o_out, lse_out) = the accumulator (o_acc [rows, width], lse_acc [rows], both of
// acc_type: f32 or f64) with every partial merged in, in order. The outputs may alias the
// accumulator (each row is read by one warp before it is written). cudaErrorInvalidValue
// for another acc_type, a non-float partial or negative sizes.
cudaError_t LaunchAttentionMerge(KDType acc_type, const void* o_acc, const void* lse_acc,
                                 std::span<const KMergePartial> partials, void* o_out,
                                 void* lse_out, int64_t rows, int64_t width,
                                 cudaStream_t stream);

}  // namespace commir::cuda_kernels

#endif  // COMMIR_BACKEND_CUDA_KERNELS_ATTENTION_MERGE_H_
