#include "backend_cpu/cpu_backend.h"

#include "absl/base/internal/raw_logging.h"
#include "absl/strings/str_cat.h"
#include "backend_cpu/kernel_table.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/shift_into.h"

namespace commir::cpu {

using runtime::Tensor;

namespace {

// Tensor operand i of a matmul: the whole tensor, or the block the interpreter hands
// over in place (OpContext::sliced).
MatrixOperand OperandOf(const runtime::OpContext& context, absl::Span<const Tensor* const> tensors,
                        size_t i) {
  const runtime::SlicedOperand* view = i < context.sliced.size() ? context.sliced[i] : nullptr;
  if (view == nullptr) return WholeMatrices(*tensors[i]);
  return MatrixOperand{view->base, {view->shape.begin(), view->shape.end()}, view->block,
                       view->dim, view->offset};
}

}  // namespace

CpuBackend::CpuBackend() {
  // An op without a kernel is a programming error in this backend: report it now, at
  // construction, not when a program first uses the op.
  if (absl::Status s = CheckCpuKernelTables(CpuTensorKernels(), CpuCollectiveKernels());
      !s.ok()) {
    ABSL_RAW_LOG(FATAL, "%s", s.ToString().c_str());
  }
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::AllocateUnfilled(
    const Operation& full, const runtime::OpContext& /*context*/) {
  const Type type = full.result(0)->type();
  if (full.num_results() != 1 || !type.is_tensor()) {
    return absl::InvalidArgumentError("AllocateUnfilled: not a tensor-valued full");
  }
  std::vector<Tensor> results;
  results.emplace_back(type.element_type(), type.dims());
  return results;
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunOp(const Operation& op,
                                                      const runtime::OpContext& context,
                                                      absl::Span<const Tensor* const> tensors,
                                                      absl::Span<const int64_t> indices) {
  if (context.donated != nullptr && op.Is(OpKind::kDynamicUpdateSlice) && tensors.size() == 2 &&
      indices.size() == 1) {
    Tensor& destination = *context.donated;
    if (absl::Status s = DynamicUpdateSliceInPlace(destination, *tensors[1],
                                                   op.RequiredIntAttr("dim"), indices[0]);
        !s.ok()) {
      return s;
    }
    std::vector<Tensor> results;
    results.push_back(std::move(destination));
    return results;
  }
  if (!context.sliced.empty() && op.Is(OpKind::kMatmul) && tensors.size() == 2) {
    absl::StatusOr<Tensor> product =
        MatMul(OperandOf(context, tensors, 0), OperandOf(context, tensors, 1),
               op.BoolAttr("transpose_a"), op.BoolAttr("transpose_b"),
               op.result(0)->type().element_type());
    if (!product.ok()) return product.status();
    std::vector<Tensor> results;
    results.push_back(*std::move(product));
    return results;
  }
  if (!context.sliced.empty() && op.Is(OpKind::kAttention) && tensors.size() == 3) {
    const MatrixOperand q = OperandOf(context, tensors, 0);
    if (q.shape.size() != 4) return absl::InvalidArgumentError("attention: q must be 4-D");
    absl::StatusOr<AttentionResult> result =
        Attention(q, OperandOf(context, tensors, 1), OperandOf(context, tensors, 2),
                  AttentionOptionsOf(op, q.shape[3], indices));
    if (!result.ok()) return result.status();
    std::vector<Tensor> results;
    results.push_back(std::move(result->output));
    if (op.num_results() == 2) results.push_back(std::move(result->lse));
    return results;
  }
  return RunOp(op, tensors, indices);
}

absl::StatusOr<bool> CpuBackend::RunMatmulInto(const Operation& matmul,
                                               const runtime::OpContext& context,
                                               absl::Span<const Tensor* const> tensors,
                                               const Operation& update, int64_t offset,
                                               Tensor& destination) {
  if (!matmul.Is(OpKind::kMatmul) || tensors.size() != 2 ||
      matmul.result(0)->type().element_type() != destination.element_type()) {
    return false;
  }
  return MatMulInto(OperandOf(context, tensors, 0), OperandOf(context, tensors, 1),
                    matmul.BoolAttr("transpose_a"),
                    matmul.BoolAttr("transpose_b"), destination, update.RequiredIntAttr("dim"),
                    offset);
}

absl::StatusOr<bool> CpuBackend::RunShiftInto(const Operation& shift,
                                              const runtime::CollectiveContext& context,
                                              absl::Span<const Tensor* const> parts,
                                              const Operation& update,
                                              absl::Span<const int64_t> offsets,
                                              absl::Span<Tensor* const> destinations) {
  if (!shift.Is(OpKind::kShift) || context.local.size() != context.group.size()) return false;
  return ShiftInto(parts, shift.IntAttr("offset"), update.RequiredIntAttr("dim"), offsets,
                   destinations, context.sliced);
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunCollective(
    const Operation& op, const runtime::CollectiveContext& context,
    absl::Span<const Tensor* const> parts) {
  if (context.local.size() != context.group.size()) {
    return absl::InvalidArgumentError(
        "the cpu backend runs a collective only with every group member's part");
  }
  return RunCollective(op, parts);
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunOp(const Operation& op,
                                                      absl::Span<const Tensor* const> tensors,
                                                      absl::Span<const int64_t> indices) {
  TensorKernel kernel = CpuTensorKernels().Find(op.kind());
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("the cpu backend does not run '", op.name(), "' as a tensor op"));
  }
  return kernel(op, tensors, indices);
}

absl::StatusOr<std::vector<Tensor>> CpuBackend::RunCollective(const Operation& op,
                                                              absl::Span<const Tensor* const> parts) {
  CollectiveKernel kernel = CpuCollectiveKernels().Find(op.kind());
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", op.name(), "' is not a collective the cpu backend knows"));
  }
  return kernel(op, parts);
}

}  // namespace commir::cpu
