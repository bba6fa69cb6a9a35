// matmul and attention.
#include <array>

#include "commir/attention_op.h"
#include "commir/ops/op_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

struct MatmulDims {
  std::vector<int64_t> batch;
  int64_t m = 0, k = 0, n = 0;
};

absl::StatusOr<MatmulDims> MatmulShape(const OpSignature& sig) {
  absl::StatusOr<Type> a = TensorOperand(sig, 0, "the left operand");
  if (!a.ok()) return a.status();
  absl::StatusOr<Type> b = TensorOperand(sig, 1, "the right operand");
  if (!b.ok()) return b.status();
  if (absl::Status s = RequireSameElementType(*a, *b, "matmul operands"); !s.ok()) return s;
  if (a->rank() < 2 || b->rank() < 2) {
    return OpError("matmul operands need rank >= 2, got %s and %s", a->ToString(), b->ToString());
  }
  const std::vector<int64_t>& ad = a->dims();
  const std::vector<int64_t>& bd = b->dims();
  bool ta = GetOpDef(OpKind::kMatmul).BoolAttr(sig.attrs, "transpose_a");
  bool tb = GetOpDef(OpKind::kMatmul).BoolAttr(sig.attrs, "transpose_b");
  MatmulDims dims;
  int64_t ra = a->rank(), rb = b->rank();
  dims.m = ta ? ad[ra - 1] : ad[ra - 2];
  int64_t ka = ta ? ad[ra - 2] : ad[ra - 1];
  int64_t kb = tb ? bd[rb - 1] : bd[rb - 2];
  dims.n = tb ? bd[rb - 2] : bd[rb - 1];
  if (ka != kb) {
    return OpError("matmul contracting dimensions differ: %d (of %s) vs %d (of %s)", ka,
                   a->ToString(), kb, b->ToString());
  }
  dims.k = ka;
  absl::StatusOr<std::vector<int64_t>> batch =
      BroadcastShapes(absl::MakeConstSpan(ad).subspan(0, ra - 2),
                      absl::MakeConstSpan(bd).subspan(0, rb - 2));
  if (!batch.ok()) return OpError("matmul batch dimensions: %s", batch.status().message());
  dims.batch = *std::move(batch);
  return dims;
}

absl::StatusOr<std::vector<Type>> InferMatmul(const OpSignature& sig) {
  absl::StatusOr<MatmulDims> dims = MatmulShape(sig);
  if (!dims.ok()) return dims.status();
  std::vector<int64_t> shape = dims->batch;
  shape.push_back(dims->m);
  shape.push_back(dims->n);
  // The result element type is the operands' unless a written type says otherwise.
  ElementType element_type = sig.annotated_results.empty() || !sig.annotated_results[0].is_tensor()
                                 ? sig.operand_types[0].element_type()
                                 : sig.annotated_results[0].element_type();
  return std::vector<Type>{Type::Tensor(element_type, std::move(shape))};
}

OpCost MatmulCost(const OpSignature& sig, absl::Span<const Type> results) {
  absl::StatusOr<MatmulDims> dims = MatmulShape(sig);
  if (!dims.ok()) return {};
  double batch = 1;
  for (int64_t d : dims->batch) batch *= static_cast<double>(d);
  return {2.0 * batch * dims->m * dims->n * dims->k, StreamingBytes(sig, results), 0};
}

// q, k and v of attention and attention_grad (operands 0..2) checked against each
// other, and the index operands from `first_position` on; returns the three types.
absl::StatusOr<std::array<Type, 3>> AttentionOperands(const OpSignature& sig, size_t first_position) {
  std::array<Type, 3> types;
  const char* roles[3] = {"q", "k", "v"};
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Type> t = TensorOperand(sig, i, roles[i]);
    if (!t.ok()) return t.status();
    if (t->rank() != 4) return OpError("%s must have rank 4 [B, H, S, D], got %s", roles[i], t->ToString());
    if (absl::Status s = RequireFloat(*t, roles[i]); !s.ok()) return s;
    types[i] = *t;
  }
  for (size_t i = first_position; i < sig.operand_types.size(); ++i) {
    if (absl::Status s = IndexOperand(sig, static_cast<int>(i),
                                      i == first_position ? "q_pos" : "k_pos");
        !s.ok()) {
      return s;
    }
  }
  const auto& q = types[0].dims();
  const auto& k = types[1].dims();
  const auto& v = types[2].dims();
  if (absl::Status s = RequireSameElementType(types[0], types[1], "q and k"); !s.ok()) return s;
  if (absl::Status s = RequireSameElementType(types[0], types[2], "q and v"); !s.ok()) return s;
  if (k[0] != q[0] || v[0] != q[0]) return OpError("q, k and v must share the batch size");
  if (k[1] != v[1] || k[2] != v[2]) {
    return OpError("k and v must have the same heads and sequence length, got %s and %s",
                   FormatShape(k), FormatShape(v));
  }
  if (k[3] != q[3]) return OpError("q and k head dims differ: %d vs %d", q[3], k[3]);
  if (k[1] == 0 || q[1] % k[1] != 0) {
    return OpError("the %d query heads are not divisible by the %d key/value heads", q[1], k[1]);
  }
  return types;
}

absl::StatusOr<std::vector<Type>> InferAttention(const OpSignature& sig) {
  absl::StatusOr<std::array<Type, 3>> types = AttentionOperands(sig, AttentionOp::kQPos);
  if (!types.ok()) return types.status();
  const auto& q = (*types)[0].dims();
  const auto& v = (*types)[2].dims();
  std::vector<Type> results{Type::Tensor((*types)[0].element_type(), {q[0], q[1], q[2], v[3]})};
  if (sig.num_results == 2) results.push_back(Type::Tensor(ElementType::kF32, {q[0], q[1], q[2]}));
  return results;
}

// attention_grad(q, k, v, o, lse, dout[, q_pos[, k_pos]]) -> dq, dk, dv: o and dout are
// attention's output [B, H, Sq, Dv] in q's type, lse its f32 [B, H, Sq].
absl::StatusOr<std::vector<Type>> InferAttentionGrad(const OpSignature& sig) {
  absl::StatusOr<std::array<Type, 3>> types = AttentionOperands(sig, AttentionGradOp::kQPos);
  if (!types.ok()) return types.status();
  const auto& q = (*types)[0].dims();
  const auto& v = (*types)[2].dims();
  const Type output = Type::Tensor((*types)[0].element_type(), {q[0], q[1], q[2], v[3]});
  const Type lse = Type::Tensor(ElementType::kF32, {q[0], q[1], q[2]});
  const struct {
    int index;
    const char* role;
    Type expected;
  } checks[] = {{AttentionGradOp::kO, "o", output},
                {AttentionGradOp::kLse, "lse", lse},
                {AttentionGradOp::kDout, "dout", output}};
  for (const auto& check : checks) {
    absl::StatusOr<Type> t = TensorOperand(sig, check.index, check.role);
    if (!t.ok()) return t.status();
    if (t->element_type() != check.expected.element_type() || t->dims() != check.expected.dims()) {
      return OpError("%s must be %s (attention's %s for these q, k and v), got %s", check.role,
                     check.expected.ToString(),
                     check.index == AttentionGradOp::kLse ? "lse" : "output", t->ToString());
    }
  }
  return std::vector<Type>{(*types)[0], (*types)[1], (*types)[2]};
}

OpCost AttentionCost(const OpSignature& sig, absl::Span<const Type> results) {
  const auto& q = sig.operand_types[0].dims();
  const auto& k = sig.operand_types[1].dims();
  const auto& v = sig.operand_types[2].dims();
  double pairs = static_cast<double>(q[0]) * q[1] * q[2] * k[2];
  // A causal mask skips about half the score blocks when queries and keys align.
  if (GetOpDef(OpKind::kAttention).BoolAttr(sig.attrs, "causal") && q[2] == k[2]) pairs *= 0.5;
  return {2.0 * pairs * (q[3] + v[3]), StreamingBytes(sig, results), 0};
}

// The flash backward recomputes the scores (q k^T) and computes dout v^T, dv = p^T dout,
// dq = ds k and dk = ds^T q: five GEMMs against the forward's two, 2.5x its FLOPs when
// the head dims are equal.
OpCost AttentionGradCost(const OpSignature& sig, absl::Span<const Type> results) {
  const auto& q = sig.operand_types[0].dims();
  const auto& k = sig.operand_types[1].dims();
  const auto& v = sig.operand_types[2].dims();
  double pairs = static_cast<double>(q[0]) * q[1] * q[2] * k[2];
  if (GetOpDef(OpKind::kAttentionGrad).BoolAttr(sig.attrs, "causal") && q[2] == k[2]) pairs *= 0.5;
  return {2.0 * pairs * (3.0 * q[3] + 2.0 * v[3]), StreamingBytes(sig, results), 0};
}

}  // namespace

void AppendLinalgOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kMatmul,
      .name = "matmul",
      .summary = "batched matrix product a[..., M, K] x b[..., K, N], f32 accumulation",
      .min_operands = 2,
      .max_operands = 2,
      .attrs = {
          {.name = "transpose_a", .kind = AttrKind::kBool, .default_value = Attribute::Bool(false)},
          {.name = "transpose_b", .kind = AttrKind::kBool, .default_value = Attribute::Bool(false)},
      },
      .infer = InferMatmul,
      .cost = MatmulCost,
      .vjp = MatmulVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kAttention,
      .name = "attention",
      .summary = "softmax(scale * q k^T) v with GQA, causal masks and optional lse",
      .min_operands = 3,
      .max_operands = 5,
      .max_results = 2,
      .attrs = {
          {.name = "causal", .kind = AttrKind::kBool, .default_value = Attribute::Bool(false)},
          // Absent: 1 / sqrt(head dim), which depends on q's type (AttentionOp::scale).
          {.name = "scale", .kind = AttrKind::kNumber},
      },
      .infer = InferAttention,
      .cost = AttentionCost,
      .vjp = AttentionVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kAttentionGrad,
      .name = "attention_grad",
      .summary = "attention's backward: dq, dk, dv from q, k, v, o, lse and dout, scores recomputed",
      .min_operands = 6,
      .max_operands = 8,
      .min_results = 3,
      .max_results = 3,
      .attrs = {
          {.name = "causal", .kind = AttrKind::kBool, .default_value = Attribute::Bool(false)},
          // Absent: 1 / sqrt(head dim), as for attention.
          {.name = "scale", .kind = AttrKind::kNumber},
          // lse normalises over a superset of the given keys (the global lse of a block
          // of keys, as a ring's step has it): p = exp(scale q k^T - lse) is used as is,
          // not renormalised per row, so the results are that block's exact share.
          {.name = "partial_keys", .kind = AttrKind::kBool,
           .default_value = Attribute::Bool(false)},
      },
      .infer = InferAttentionGrad,
      .cost = AttentionGradCost,
  });
}

}  // namespace commir::ops
