#include "backend_cuda/gemm_batch.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace commir::cuda {
namespace {

int64_t Product(absl::Span<const int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims) p *= d;
  return p;
}

// Stride (in matrices) of each output batch dimension inside an operand's batch, 0
// where the operand broadcasts.
std::vector<int64_t> OperandStrides(absl::Span<const int64_t> operand,
                                    absl::Span<const int64_t> out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (size_t i = 0; i < operand.size(); ++i) {
    size_t o = out.size() - 1 - i;
    size_t p = operand.size() - 1 - i;
    strides[o] = operand[p] == 1 ? 0 : stride;
    stride *= operand[p];
  }
  return strides;
}

}  // namespace

absl::StatusOr<BatchPlan> PlanBatches(absl::Span<const int64_t> a_batch,
                                      absl::Span<const int64_t> b_batch) {
  BatchPlan plan;
  const size_t rank = std::max(a_batch.size(), b_batch.size());
  plan.batch_shape.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t a = i < a_batch.size() ? a_batch[a_batch.size() - 1 - i] : 1;
    int64_t b = i < b_batch.size() ? b_batch[b_batch.size() - 1 - i] : 1;
    if (a != b && a != 1 && b != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "matmul: batch dimensions [%s] and [%s] do not broadcast", absl::StrJoin(a_batch, ", "),
          absl::StrJoin(b_batch, ", ")));
    }
    plan.batch_shape[rank - 1 - i] = a == 1 ? b : a;
  }
  plan.batch = Product(plan.batch_shape);
  auto stride_of = [&](absl::Span<const int64_t> operand, int64_t& stride) {
    int64_t count = Product(operand);
    if (count == 1) {
      stride = 0;
      return true;
    }
    stride = 1;
    return count == plan.batch;  // broadcasting never shrinks, so equal count = equal shape
  };
  plan.strided = stride_of(a_batch, plan.a_stride_matrices) &&
                 stride_of(b_batch, plan.b_stride_matrices);
  if (plan.strided) return plan;
  const std::vector<int64_t> a_strides = OperandStrides(a_batch, plan.batch_shape);
  const std::vector<int64_t> b_strides = OperandStrides(b_batch, plan.batch_shape);
  std::vector<int64_t> index(rank, 0);
  for (int64_t i = 0; i < plan.batch; ++i) {
    int64_t a = 0, b = 0;
    for (size_t d = 0; d < rank; ++d) {
      a += index[d] * a_strides[d];
      b += index[d] * b_strides[d];
    }
    plan.a_index.push_back(a);
    plan.b_index.push_back(b);
    for (size_t d = rank; d-- > 0;) {
      if (++index[d] < plan.batch_shape[d]) break;
      index[d] = 0;
    }
  }
  return plan;
}

}  // namespace commir::cuda
