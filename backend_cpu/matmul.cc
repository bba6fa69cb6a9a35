// Batched matrix multiplication with NumPy-broadcast batch dimensions. Float products go
// through BLAS one batch entry at a time; integer products use a plain triple loop.
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "backend_cpu/blas_gemm.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/shape_util.h"
#include "commir/element_type.h"
#include "runtime/compute_values.h"
#include "runtime/in_place.h"
#include "runtime/tensor.h"

namespace commir::cpu {

using runtime::DispatchFloatCompute;
using runtime::LoadAs;
using runtime::StoreAs;

namespace {

// The operands' geometry once transposition and batch broadcasting are resolved.
struct MatMulPlan {
  int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  std::vector<int64_t> batch_shape;
  // For batch entry i (row-major over batch_shape), the first element of a's and b's
  // matrices: broadcast batch dimensions read the same matrix again.
  std::vector<int64_t> a_offsets, b_offsets;
  // Row strides of a's and b's matrices (larger than packed for a column block).
  int64_t lda = 0, ldb = 0;
  std::vector<int64_t> ResultShape() const {
    std::vector<int64_t> shape = batch_shape;
    shape.push_back(m);
    shape.push_back(n);
    return shape;
  }
};

// Element offsets of each broadcast batch entry's matrix in an operand with batch shape
// `operand_batch` and `matrix_size` elements per matrix.
std::vector<int64_t> BatchOffsets(absl::Span<const int64_t> operand_batch,
                                  absl::Span<const int64_t> batch_shape, int64_t matrix_size) {
  const std::vector<int64_t> strides = BroadcastStrides(operand_batch, batch_shape);
  std::vector<int64_t> offsets(runtime::NumElements(batch_shape));
  std::vector<int64_t> index(batch_shape.size(), 0);
  for (int64_t& offset : offsets) {
    offset = 0;
    for (size_t d = 0; d < index.size(); ++d) offset += index[d] * strides[d] * matrix_size;
    // Next row-major batch index.
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < batch_shape[d]) break;
      index[d] = 0;
    }
  }
  return offsets;
}

absl::StatusOr<MatMulPlan> PlanMatMul(const MatrixOperand& a, const MatrixOperand& b,
                                      bool transpose_a, bool transpose_b) {
  if (a.tensor->element_type() != b.tensor->element_type()) {
    return CheckSameElementType("matmul", *a.tensor, *b.tensor);
  }
  const int64_t a_rank = static_cast<int64_t>(a.shape.size());
  const int64_t b_rank = static_cast<int64_t>(b.shape.size());
  if (a_rank < 2 || b_rank < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "matmul: operands need rank >= 2, got %s[%s] and %s[%s]",
        ElementTypeName(a.tensor->element_type()), absl::StrJoin(a.shape, ", "),
        ElementTypeName(b.tensor->element_type()), absl::StrJoin(b.shape, ", ")));
  }
  MatMulPlan plan;
  plan.transpose_a = transpose_a;
  plan.transpose_b = transpose_b;
  const int64_t a_rows = a.shape[a_rank - 2], a_cols = a.shape[a_rank - 1];
  const int64_t b_rows = b.shape[b_rank - 2], b_cols = b.shape[b_rank - 1];
  plan.m = transpose_a ? a_cols : a_rows;
  plan.k = transpose_a ? a_rows : a_cols;
  const int64_t b_k = transpose_b ? b_cols : b_rows;
  plan.n = transpose_b ? b_rows : b_cols;
  if (plan.k != b_k) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "matmul: contracting dimensions differ (%d vs %d) for [%s]%s x [%s]%s", plan.k, b_k,
        absl::StrJoin(a.shape, ", "), transpose_a ? "^T" : "", absl::StrJoin(b.shape, ", "),
        transpose_b ? "^T" : ""));
  }
  const absl::Span<const int64_t> a_batch = absl::MakeConstSpan(a.shape).subspan(0, a_rank - 2);
  const absl::Span<const int64_t> b_batch = absl::MakeConstSpan(b.shape).subspan(0, b_rank - 2);
  absl::StatusOr<std::vector<int64_t>> batch_shape =
      BroadcastShapes("matmul batch", a_batch, b_batch);
  if (!batch_shape.ok()) return batch_shape.status();
  plan.batch_shape = *std::move(batch_shape);
  plan.a_offsets = BatchOffsets(a_batch, plan.batch_shape, a.block.matrix_stride);
  plan.b_offsets = BatchOffsets(b_batch, plan.batch_shape, b.block.matrix_stride);
  for (int64_t& offset : plan.a_offsets) offset += a.block.first;
  for (int64_t& offset : plan.b_offsets) offset += b.block.first;
  plan.lda = a.block.row_stride;
  plan.ldb = b.block.row_stride;
  return plan;
}

template <typename T>
std::vector<T> FloatMatMul(const MatMulPlan& plan, const std::vector<T>& a,
                           const std::vector<T>& b) {
  std::vector<T> result(plan.a_offsets.size() * plan.m * plan.n);
  for (size_t i = 0; i < plan.a_offsets.size(); ++i) {
    Gemm(plan.transpose_a, plan.transpose_b, plan.m, plan.n, plan.k, T{1},
         a.data() + plan.a_offsets[i], plan.lda, b.data() + plan.b_offsets[i], plan.ldb,
         result.data() + i * plan.m * plan.n, plan.n);
  }
  return result;
}

// The same on the operands' own storage (f32 and f64 operands: the compute type), into
// `c` with row stride ldc: no operand is copied.
template <typename T>
void DirectMatMul(const MatMulPlan& plan, const T* a, const T* b, T* c, int64_t ldc) {
  for (size_t i = 0; i < plan.a_offsets.size(); ++i) {
    Gemm(plan.transpose_a, plan.transpose_b, plan.m, plan.n, plan.k, T{1},
         a + plan.a_offsets[i], plan.lda, b + plan.b_offsets[i], plan.ldb,
         c + i * plan.m * plan.n, ldc);
  }
}

// Whether BLAS reads `type` where it lies (f32 and f64: their own compute type).
bool Direct(ElementType type) { return type == ElementType::kF32 || type == ElementType::kF64; }

// A block read in place as the tensor of its own that the dynamic_slice makes, for the
// element types BLAS does not read directly (they are converted, which copies anyway).
absl::StatusOr<Tensor> Materialized(const MatrixOperand& operand) {
  if (operand.sliced_dim < 0) return *operand.tensor;
  return DynamicSlice(*operand.tensor, operand.sliced_dim, operand.offset,
                      operand.shape[operand.sliced_dim]);
}

// Integer matmul is rare (index arithmetic on small tensors), so a direct loop with
// two's-complement wraparound is enough.
std::vector<int64_t> IntegerMatMul(const MatMulPlan& plan, const std::vector<int64_t>& a,
                                   const std::vector<int64_t>& b) {
  std::vector<int64_t> result(plan.a_offsets.size() * plan.m * plan.n);
  for (size_t batch = 0; batch < plan.a_offsets.size(); ++batch) {
    const int64_t* a_matrix = a.data() + plan.a_offsets[batch];
    const int64_t* b_matrix = b.data() + plan.b_offsets[batch];
    int64_t* out = result.data() + batch * plan.m * plan.n;
    for (int64_t i = 0; i < plan.m; ++i) {
      for (int64_t j = 0; j < plan.n; ++j) {
        uint64_t sum = 0;
        for (int64_t l = 0; l < plan.k; ++l) {
          const int64_t a_value =
              plan.transpose_a ? a_matrix[l * plan.m + i] : a_matrix[i * plan.k + l];
          const int64_t b_value =
              plan.transpose_b ? b_matrix[j * plan.k + l] : b_matrix[l * plan.n + j];
          sum += static_cast<uint64_t>(a_value) * static_cast<uint64_t>(b_value);
        }
        out[i * plan.n + j] = static_cast<int64_t>(sum);
      }
    }
  }
  return result;
}

}  // namespace

MatrixOperand WholeMatrices(const Tensor& tensor) {
  MatrixOperand operand{&tensor, {tensor.shape().begin(), tensor.shape().end()}, {}};
  const int64_t rank = tensor.rank();
  const int64_t rows = rank >= 2 ? tensor.dim(rank - 2) : 0;
  const int64_t cols = rank >= 1 ? tensor.dim(rank - 1) : 0;
  operand.block = runtime::MatrixBlock{0, cols, rows * cols};
  return operand;
}

absl::StatusOr<Tensor> MatMul(const Tensor& a, const Tensor& b, bool transpose_a, bool transpose_b,
                              ElementType result_type) {
  return MatMul(WholeMatrices(a), WholeMatrices(b), transpose_a, transpose_b, result_type);
}

absl::StatusOr<Tensor> MatMul(const MatrixOperand& a, const MatrixOperand& b, bool transpose_a,
                              bool transpose_b, ElementType result_type) {
  const ElementType type = a.tensor->element_type();
  const bool whole = a.sliced_dim < 0 && b.sliced_dim < 0;
  if (!whole && (!Direct(type) || b.tensor->element_type() != type)) {
    // Converting to the compute type copies the operands anyway.
    absl::StatusOr<Tensor> a_block = Materialized(a);
    if (!a_block.ok()) return a_block.status();
    absl::StatusOr<Tensor> b_block = Materialized(b);
    if (!b_block.ok()) return b_block.status();
    return MatMul(*a_block, *b_block, transpose_a, transpose_b, result_type);
  }
  absl::StatusOr<MatMulPlan> plan = PlanMatMul(a, b, transpose_a, transpose_b);
  if (!plan.ok()) return plan.status();
  if (IsIntegerType(type)) {
    const std::vector<int64_t> product = IntegerMatMul(*plan, a.tensor->ToInt64(), b.tensor->ToInt64());
    return Tensor::FromInt64(result_type, plan->ResultShape(), product);
  }
  if (Direct(type) && result_type == type) {
    Tensor result(result_type, plan->ResultShape());
    if (type == ElementType::kF32) {
      DirectMatMul(*plan, a.tensor->data<float>(), b.tensor->data<float>(), result.data<float>(),
                   plan->n);
    } else {
      DirectMatMul(*plan, a.tensor->data<double>(), b.tensor->data<double>(),
                   result.data<double>(), plan->n);
    }
    return result;
  }
  return DispatchFloatCompute(type, [&](auto zero) {
    using T = decltype(zero);
    const std::vector<T> product =
        FloatMatMul(*plan, LoadAs<T>(*a.tensor), LoadAs<T>(*b.tensor));
    return StoreAs<T>(result_type, plan->ResultShape(), product);
  });
}

absl::StatusOr<bool> MatMulInto(const Tensor& a, const Tensor& b, bool transpose_a,
                                bool transpose_b, Tensor& destination, int64_t dim,
                                int64_t offset) {
  return MatMulInto(WholeMatrices(a), WholeMatrices(b), transpose_a, transpose_b, destination,
                    dim, offset);
}

absl::StatusOr<bool> MatMulInto(const MatrixOperand& a, const MatrixOperand& b, bool transpose_a,
                                bool transpose_b, Tensor& destination, int64_t dim,
                                int64_t offset) {
  const ElementType type = destination.element_type();
  // Operands and destination that are one matrix each ([1, S, H] as [S, H]): their last
  // two dimensions.
  if (!runtime::IsOneMatrix(a.shape) || !runtime::IsOneMatrix(b.shape) ||
      !runtime::IsOneMatrix(destination.shape()) || a.tensor->element_type() != type ||
      b.tensor->element_type() != type || !Direct(type)) {
    return false;
  }
  const int64_t matrix_dim = runtime::MatrixDimOf(dim, destination.rank());
  if (matrix_dim < 0) return false;
  MatrixOperand a2 = a, b2 = b;
  a2.shape.erase(a2.shape.begin(), a2.shape.end() - 2);
  b2.shape.erase(b2.shape.begin(), b2.shape.end() - 2);
  absl::StatusOr<MatMulPlan> plan = PlanMatMul(a2, b2, transpose_a, transpose_b);
  if (!plan.ok()) return false;
  const int64_t rank = destination.rank();
  const std::optional<runtime::MatrixBlock> place =
      runtime::PlaceBlock(destination.dim(rank - 2), destination.dim(rank - 1), matrix_dim,
                          offset, plan->m, plan->n);
  if (!place.has_value()) return false;
  const int64_t first = place->first, ldc = place->row_stride;
  if (type == ElementType::kF32) {
    DirectMatMul(*plan, a.tensor->data<float>(), b.tensor->data<float>(),
                 destination.data<float>() + first, ldc);
  } else {
    DirectMatMul(*plan, a.tensor->data<double>(), b.tensor->data<double>(),
                 destination.data<double>() + first, ldc);
  }
  return true;
}

}  // namespace commir::cpu
