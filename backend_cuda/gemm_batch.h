// Batch geometry of a CommIR matmul (NumPy-broadcast batch dimensions) for a
// strided-batched GEMM. Pure host code, tested on any machine (gemm_batch_test.cc).
#ifndef COMMIR_BACKEND_CUDA_GEMM_BATCH_H_
#define COMMIR_BACKEND_CUDA_GEMM_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace commir::cuda {

struct BatchPlan {
  std::vector<int64_t> batch_shape;  // broadcast of both operands' batch shapes
  int64_t batch = 1;                 // its element count
  // True when one strided-batched call expresses the broadcast: each operand's batch
  // is all ones (stride 0) or, left-padded with ones, equal to batch_shape (stride of
  // one matrix).
  bool strided = true;
  int64_t a_stride_matrices = 0, b_stride_matrices = 0;  // 0 or 1
  // Otherwise: for output batch entry i, the matrix index inside a's and b's batch.
  std::vector<int64_t> a_index, b_index;
};

// InvalidArgument when the batch shapes do not broadcast.
absl::StatusOr<BatchPlan> PlanBatches(absl::Span<const int64_t> a_batch,
                                      absl::Span<const int64_t> b_batch);

}  // namespace commir::cuda

#endif  // COMMIR_BACKEND_CUDA_GEMM_BATCH_H_
