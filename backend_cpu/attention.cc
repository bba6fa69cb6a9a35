// Scaled dot-product attention with grouped kv heads, position-based causal masking and
// the log-sum-exp of each query's scores (docs/language.md, `attention`).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <limits>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "backend_cpu/blas_gemm.h"
#include "backend_cpu/kernels.h"
#include "backend_cpu/pairwise_sum.h"
#include "backend_cpu/shape_util.h"
#include "commir/attention_op.h"
#include "commir/element_type.h"
#include "commir/scalar_math.h"
#include "runtime/compute_values.h"
#include "runtime/tensor.h"

namespace commir::cpu {

using runtime::DispatchFloatCompute;
using runtime::LoadAs;
using runtime::StoreAs;

namespace {

struct AttentionShape {
  int64_t batch, heads, kv_heads, queries, keys, head_dim, value_dim;
};

std::string OperandTypeString(const MatrixOperand& operand) {
  return absl::StrFormat("%s[%s]", ElementTypeName(operand.tensor->element_type()),
                         absl::StrJoin(operand.shape, ", "));
}

absl::StatusOr<AttentionShape> CheckAttentionShapes(const MatrixOperand& q,
                                                    const MatrixOperand& k,
                                                    const MatrixOperand& v) {
  for (const MatrixOperand* operand : {&q, &k, &v}) {
    if (absl::Status status = CheckFloatType("attention", *operand->tensor); !status.ok()) {
      return status;
    }
  }
  if (q.shape.size() != 4 || k.shape.size() != 4 || v.shape.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrFormat("attention: q, k and v must be 4-D [B, H, S, D], got %s, %s and %s",
                        OperandTypeString(q), OperandTypeString(k), OperandTypeString(v)));
  }
  const AttentionShape shape{q.shape[0], q.shape[1], k.shape[1], q.shape[2],
                             k.shape[2], q.shape[3], v.shape[3]};
  const bool consistent = k.shape[0] == shape.batch && v.shape[0] == shape.batch &&
                          v.shape[1] == shape.kv_heads && v.shape[2] == shape.keys &&
                          k.shape[3] == shape.head_dim;
  if (!consistent) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "attention: expected q [B, H, Sq, D], k [B, Hkv, Skv, D] and v [B, Hkv, Skv, Dv], "
        "got %s, %s and %s",
        OperandTypeString(q), OperandTypeString(k), OperandTypeString(v)));
  }
  if (shape.kv_heads == 0 ? shape.heads != 0 : shape.heads % shape.kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("attention: the %d query heads are not a multiple of the %d kv heads",
                        shape.heads, shape.kv_heads));
  }
  return shape;
}

// How many keys a query at `query_position` sees under the causal mask: key j (position
// k_pos + j) is visible iff k_pos + j <= query_position, so the visible keys are a prefix.
// Positions come from the program, so the arithmetic is done in 128 bits to stay exact.
int64_t CausallyVisibleKeys(absl::int128 query_position, int64_t k_pos, int64_t keys) {
  const absl::int128 visible = query_position - k_pos + 1;
  return static_cast<int64_t>(std::clamp<absl::int128>(visible, 0, keys));
}

// Masked softmax of one row of scores, in place, returning its log-sum-exp. Only the first
// `visible` keys count; the rest become 0, and with no visible key the whole row is 0 and
// the log-sum-exp is -inf.
template <typename T>
T MaskedSoftmaxRow(T* scores, int64_t keys, int64_t visible) {
  std::fill(scores + visible, scores + keys, T{0});
  if (visible == 0) return -std::numeric_limits<T>::infinity();
  const T maximum = *std::max_element(scores, scores + visible);
  for (int64_t j = 0; j < visible; ++j) scores[j] = scalar_math::Exp(scores[j] - maximum);
  const T sum = PairwiseSum(scores, visible);
  for (int64_t j = 0; j < visible; ++j) scores[j] /= sum;
  return maximum + scalar_math::Log(sum);
}

// The operand's elements in T, row-major over its (the block's) shape. A block is read
// matrix by matrix from where it lies in its tensor: element (m, r, c) of the block is the
// tensor's element block.first + m * matrix_stride + r * row_stride + c. f32 and f64
// rows are copied as they are, other types widened exactly (double holds every f16, bf16
// and f32 value), so the values are those of the sliced tensor's LoadAs.
template <typename T>
std::vector<T> LoadOperandAs(const MatrixOperand& operand) {
  if (operand.sliced_dim < 0) return LoadAs<T>(*operand.tensor);
  const int64_t rank = static_cast<int64_t>(operand.shape.size());
  const int64_t rows = operand.shape[rank - 2], cols = operand.shape[rank - 1];
  int64_t matrices = 1;
  for (int64_t d = 0; d < rank - 2; ++d) matrices *= operand.shape[d];
  std::vector<T> values(matrices * rows * cols);
  const Tensor& tensor = *operand.tensor;
  const ElementType type = tensor.element_type();
  T* out = values.data();
  for (int64_t m = 0; m < matrices; ++m) {
    for (int64_t r = 0; r < rows; ++r, out += cols) {
      const int64_t first =
          operand.block.first + m * operand.block.matrix_stride + r * operand.block.row_stride;
      if (std::is_same_v<T, float> && type == ElementType::kF32) {
        std::memcpy(out, tensor.data<float>() + first, cols * sizeof(float));
      } else if (std::is_same_v<T, double> && type == ElementType::kF64) {
        std::memcpy(out, tensor.data<double>() + first, cols * sizeof(double));
      } else {
        for (int64_t c = 0; c < cols; ++c) out[c] = static_cast<T>(tensor.GetAsDouble(first + c));
      }
    }
  }
  return values;
}

template <typename T>
AttentionResult ComputeAttention(const AttentionShape& shape, const MatrixOperand& q,
                                 const MatrixOperand& k, const MatrixOperand& v,
                                 const AttentionOptions& options) {
  const std::vector<T> queries = LoadOperandAs<T>(q);
  const std::vector<T> keys = LoadOperandAs<T>(k);
  const std::vector<T> values = LoadOperandAs<T>(v);
  const T scale =
      static_cast<T>(options.scale.value_or(AttentionOp::DefaultScale(shape.head_dim)));
  const int64_t q_pos = options.q_pos.value_or(shape.keys - shape.queries);
  const int64_t group_size = shape.kv_heads == 0 ? 1 : shape.heads / shape.kv_heads;

  std::vector<T> output(shape.batch * shape.heads * shape.queries * shape.value_dim);
  std::vector<T> lse(shape.batch * shape.heads * shape.queries);
  // Under the causal mask the visible keys of every row are a prefix, longest for the
  // last query: keys past it are never read. A block that no query sees (ring attention's
  // future blocks) is then all zeros with lse = -inf, and costs no GEMM.
  const int64_t used_keys =
      !options.causal || shape.queries == 0
          ? shape.keys
          : CausallyVisibleKeys(q_pos + absl::int128(shape.queries - 1), options.k_pos, shape.keys);
  if (used_keys == 0) std::fill(lse.begin(), lse.end(), -std::numeric_limits<T>::infinity());
  std::vector<T> scores(shape.queries * shape.keys);
  for (int64_t b = 0; used_keys > 0 && b < shape.batch; ++b) {
    for (int64_t h = 0; h < shape.heads; ++h) {
      const int64_t kv_head = h / group_size;
      const int64_t row_block = (b * shape.heads + h) * shape.queries;
      const int64_t kv_block = (b * shape.kv_heads + kv_head) * shape.keys;
      // scores[Sq, Skv] = scale * Q K^T
      Gemm(false, true, shape.queries, used_keys, shape.head_dim, scale,
           queries.data() + row_block * shape.head_dim, shape.head_dim,
           keys.data() + kv_block * shape.head_dim, shape.head_dim, scores.data(), shape.keys);
      for (int64_t i = 0; i < shape.queries; ++i) {
        const int64_t visible =
            options.causal ? CausallyVisibleKeys(q_pos + absl::int128(i), options.k_pos, shape.keys)
                           : shape.keys;
        lse[row_block + i] = MaskedSoftmaxRow(scores.data() + i * shape.keys, shape.keys, visible);
      }
      // output[Sq, Dv] = P V
      Gemm(false, false, shape.queries, shape.value_dim, used_keys, T{1}, scores.data(),
           shape.keys, values.data() + kv_block * shape.value_dim, shape.value_dim,
           output.data() + row_block * shape.value_dim, shape.value_dim);
    }
  }
  return AttentionResult{
      StoreAs<T>(q.tensor->element_type(),
                 {shape.batch, shape.heads, shape.queries, shape.value_dim},
                 output),
      StoreAs<T>(ElementType::kF32, {shape.batch, shape.heads, shape.queries}, lse)};
}

}  // namespace

absl::StatusOr<AttentionResult> Attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const AttentionOptions& options) {
  return Attention(WholeMatrices(q), WholeMatrices(k), WholeMatrices(v), options);
}

absl::StatusOr<AttentionResult> Attention(const MatrixOperand& q, const MatrixOperand& k,
                                          const MatrixOperand& v, const AttentionOptions& options) {
  absl::StatusOr<AttentionShape> shape = CheckAttentionShapes(q, k, v);
  if (!shape.ok()) return shape.status();
  return DispatchFloatCompute(q.tensor->element_type(), [&](auto zero) {
    return ComputeAttention<decltype(zero)>(*shape, q, k, v, options);
  });
}

}  // namespace commir::cpu
