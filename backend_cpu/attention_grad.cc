// Attention's backward (docs/language.md, `attention_grad`), flash-style: the scores of
// each block of queries are recomputed from q and k and the probabilities rebuilt from
// the forward's log-sum-exp, so no [Sq, Skv] matrix outlives its block.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
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

// Queries whose scores are recomputed together: a block's scores and their gradient are
// the only [rows, Skv] buffers.
constexpr int64_t kQueryBlock = 64;

struct GradShape {
  int64_t batch, heads, kv_heads, queries, keys, head_dim, value_dim;
};

absl::Status ShapeError(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& o,
                        const Tensor& lse, const Tensor& dout) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "attention_grad: expected q [B, H, Sq, D], k [B, Hkv, Skv, D], v [B, Hkv, Skv, Dv], "
      "o and dout [B, H, Sq, Dv] in q's type and lse f32 [B, H, Sq] (H a multiple of Hkv), "
      "got %s, %s, %s, %s, %s and %s",
      q.DebugTypeString(), k.DebugTypeString(), v.DebugTypeString(), o.DebugTypeString(),
      lse.DebugTypeString(), dout.DebugTypeString()));
}

absl::StatusOr<GradShape> CheckGradShapes(const Tensor& q, const Tensor& k, const Tensor& v,
                                          const Tensor& o, const Tensor& lse, const Tensor& dout) {
  for (const Tensor* operand : {&q, &k, &v, &o, &lse, &dout}) {
    if (absl::Status status = CheckFloatType("attention_grad", *operand); !status.ok()) {
      return status;
    }
  }
  if (q.rank() != 4 || k.rank() != 4 || v.rank() != 4 || o.rank() != 4 || dout.rank() != 4 ||
      lse.rank() != 3) {
    return ShapeError(q, k, v, o, lse, dout);
  }
  const GradShape s{q.dim(0), q.dim(1), k.dim(1), q.dim(2), k.dim(2), q.dim(3), v.dim(3)};
  const std::vector<int64_t> output{s.batch, s.heads, s.queries, s.value_dim};
  const bool consistent =
      k.dim(0) == s.batch && v.dim(0) == s.batch && v.dim(1) == s.kv_heads &&
      v.dim(2) == s.keys && k.dim(3) == s.head_dim && o.shape() == output &&
      dout.shape() == output &&
      lse.shape() == std::vector<int64_t>{s.batch, s.heads, s.queries} &&
      lse.element_type() == ElementType::kF32 && o.element_type() == q.element_type() &&
      dout.element_type() == q.element_type() && k.element_type() == q.element_type() &&
      v.element_type() == q.element_type() &&
      (s.kv_heads == 0 ? s.heads == 0 : s.heads % s.kv_heads == 0);
  if (!consistent) return ShapeError(q, k, v, o, lse, dout);
  return s;
}

// Keys visible to the query at `query_position` under the causal mask (a prefix), as in
// the forward kernel; 128-bit arithmetic because positions come from the program.
int64_t VisibleKeys(absl::int128 query_position, int64_t k_pos, int64_t keys) {
  return static_cast<int64_t>(std::clamp<absl::int128>(query_position - k_pos + 1, 0, keys));
}

template <typename T>
struct GradBuffers {
  std::vector<T> dq, dk, dv;
};

template <typename T>
AttentionGradResult ComputeAttentionGrad(const GradShape& s, const Tensor& q_t, const Tensor& k_t,
                                         const Tensor& v_t, const Tensor& o_t, const Tensor& lse_t,
                                         const Tensor& dout_t, const AttentionOptions& options) {
  const std::vector<T> q = LoadAs<T>(q_t), k = LoadAs<T>(k_t), v = LoadAs<T>(v_t);
  const std::vector<T> o = LoadAs<T>(o_t), dout = LoadAs<T>(dout_t);
  const std::vector<T> lse = LoadAs<T>(lse_t);
  const T scale = static_cast<T>(options.scale.value_or(AttentionOp::DefaultScale(s.head_dim)));
  const int64_t q_pos = options.q_pos.value_or(s.keys - s.queries);
  const int64_t group_size = s.kv_heads == 0 ? 1 : s.heads / s.kv_heads;

  GradBuffers<T> grad{std::vector<T>(q.size()), std::vector<T>(k.size()), std::vector<T>(v.size())};
  const int64_t block = std::min(kQueryBlock, s.queries);
  std::vector<T> p(block * s.keys), dp(block * s.keys), part_k(s.keys * s.head_dim),
      part_v(s.keys * s.value_dim);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t rows = (b * s.heads + h) * s.queries;
      const int64_t kv_rows = (b * s.kv_heads + h / group_size) * s.keys;
      for (int64_t first = 0; first < s.queries; first += block) {
        const int64_t n = std::min(block, s.queries - first);
        const T* q_blk = q.data() + (rows + first) * s.head_dim;
        const T* dout_blk = dout.data() + (rows + first) * s.value_dim;
        // Keys past the block's last visible one are never read (all probabilities 0).
        const int64_t used =
            options.causal ? VisibleKeys(q_pos + absl::int128(first + n - 1), options.k_pos, s.keys)
                           : s.keys;
        if (used == 0) continue;  // no query of the block sees a key: every gradient is 0
        // p = scale q k^T, dp = dout v^T.
        Gemm(false, true, n, used, s.head_dim, scale, q_blk, s.head_dim,
             k.data() + kv_rows * s.head_dim, s.head_dim, p.data(), s.keys);
        Gemm(false, true, n, used, s.value_dim, T{1}, dout_blk, s.value_dim,
             v.data() + kv_rows * s.value_dim, s.value_dim, dp.data(), s.keys);
        for (int64_t i = 0; i < n; ++i) {
          T* p_row = p.data() + i * s.keys;
          T* dp_row = dp.data() + i * s.keys;
          const T row_lse = lse[rows + first + i];
          const int64_t visible =
              options.causal ? VisibleKeys(q_pos + absl::int128(first + i), options.k_pos, s.keys)
                             : s.keys;
          std::fill(p_row + std::min(visible, used), p_row + used, T{0});
          if (visible == 0 || std::isinf(row_lse)) {
            std::fill(p_row, p_row + used, T{0});
          } else {
            for (int64_t j = 0; j < visible; ++j) {
              p_row[j] = scalar_math::Exp(p_row[j] - row_lse);
            }
            // The lse arrives in f32: dividing by the row's sum removes its rounding (a
            // per-row factor), so an f64 gradient is exact to f64. Not with partial keys:
            // their lse also counts keys this call does not see, so the row's sum is
            // below 1 by exactly those keys' share.
            if (!options.partial_keys) {
              const T sum = PairwiseSum(p_row, visible);
              for (int64_t j = 0; j < visible; ++j) p_row[j] /= sum;
            }
          }
          // ds = p * (dp - rowsum(dout * o)) * scale: the softmax's backward, then the
          // scale's.
          const T* o_row = o.data() + (rows + first + i) * s.value_dim;
          const T* dout_row = dout_blk + i * s.value_dim;
          T delta = 0;
          for (int64_t d = 0; d < s.value_dim; ++d) delta += dout_row[d] * o_row[d];
          for (int64_t j = 0; j < used; ++j) dp_row[j] = p_row[j] * (dp_row[j] - delta) * scale;
        }
        // dq = ds k; dk += ds^T q; dv += p^T dout (the group's query heads share k, v).
        Gemm(false, false, n, s.head_dim, used, T{1}, dp.data(), s.keys,
             k.data() + kv_rows * s.head_dim, s.head_dim,
             grad.dq.data() + (rows + first) * s.head_dim, s.head_dim);
        Gemm(true, false, used, s.head_dim, n, T{1}, dp.data(), s.keys, q_blk, s.head_dim,
             part_k.data(), s.head_dim);
        Gemm(true, false, used, s.value_dim, n, T{1}, p.data(), s.keys, dout_blk, s.value_dim,
             part_v.data(), s.value_dim);
        T* dk = grad.dk.data() + kv_rows * s.head_dim;
        T* dv = grad.dv.data() + kv_rows * s.value_dim;
        for (int64_t x = 0; x < used * s.head_dim; ++x) dk[x] += part_k[x];
        for (int64_t x = 0; x < used * s.value_dim; ++x) dv[x] += part_v[x];
      }
    }
  }
  return AttentionGradResult{StoreAs<T>(q_t.element_type(), q_t.shape(), grad.dq),
                             StoreAs<T>(k_t.element_type(), k_t.shape(), grad.dk),
                             StoreAs<T>(v_t.element_type(), v_t.shape(), grad.dv)};
}

}  // namespace

absl::StatusOr<AttentionGradResult> AttentionGrad(const Tensor& q, const Tensor& k,
                                                  const Tensor& v, const Tensor& o,
                                                  const Tensor& lse, const Tensor& dout,
                                                  const AttentionOptions& options) {
  absl::StatusOr<GradShape> shape = CheckGradShapes(q, k, v, o, lse, dout);
  if (!shape.ok()) return shape.status();
  return DispatchFloatCompute(q.element_type(), [&](auto zero) {
    return ComputeAttentionGrad<decltype(zero)>(*shape, q, k, v, o, lse, dout, options);
  });
}

}  // namespace commir::cpu
