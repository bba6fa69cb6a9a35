// Derivative rules of matmul and attention.
#include "absl/status/status.h"
#include "commir/ops/vjp_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

Value* Matmul(OpBuilder& b, Value* x, Value* y, bool transpose_x, bool transpose_y) {
  AttrDict attrs;
  if (transpose_x) attrs.Set("transpose_a", Attribute::Bool(true));
  if (transpose_y) attrs.Set("transpose_b", Attribute::Bool(true));
  return b.Op(OpKind::kMatmul, {x, y}, std::move(attrs));
}

}  // namespace

// Y = A B with A = a or a^T, B = b or b^T: dA = g B^T, dB = A^T g, each written as one
// matmul on a, b and g with transpose flags; broadcast batch dims are summed back.
absl::StatusOr<std::vector<Value*>> MatmulVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  const ElementType et = g->type().element_type();
  const bool ta = op.BoolAttr("transpose_a");
  const bool tb = op.BoolAttr("transpose_b");
  Value* x = b.Convert(op.operand(0), et);
  Value* y = b.Convert(op.operand(1), et);
  Value* dx = ta ? Matmul(b, y, g, tb, true) : Matmul(b, g, y, false, !tb);
  Value* dy = tb ? Matmul(b, g, x, true, ta) : Matmul(b, x, g, !ta, false);
  return Finish(b, {SumToShape(b, dx, op.operand(0)->type().dims()),
                    SumToShape(b, dy, op.operand(1)->type().dims())});
}

// Attention's backward is one flash-style op: attention_grad(q, k, v, o, lse, dout
// [, q_pos, k_pos]) -> dq, dk, dv recomputes the scores from lse instead of keeping them.
// The forward's o and lse are reused when the op returns lse (autodiff's copy of a
// differentiated attention always does); otherwise the forward is run again with lse.
//
// A gradient through lse (a program that merges partial attentions, or a z-loss) joins
// the same op: d lse_i / d s_ij = p_ij, so it adds dlse_i * p_ij to the scores'
// gradient, which attention_grad computes as p * (dout v^T - rowsum(dout * o)). Giving v
// an extra column of ones, dout the column dlse and o a column of zeros adds exactly
// dlse_i to row i of dout v^T and nothing to the rowsum; dv's extra column is dropped.
absl::StatusOr<std::vector<Value*>> AttentionVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* dout = args.result_cotangents[0];
  Value* dlse = args.result_cotangents.size() > 1 ? args.result_cotangents[1] : nullptr;
  if (dout == nullptr && dlse == nullptr) {
    return absl::InvalidArgumentError("attention without a cotangent");
  }
  const std::vector<int64_t> o_dims = op.result(0)->type().dims();
  const ElementType et = dout != nullptr
                             ? dout->type().element_type()
                             : CotangentElementType(op.result(0)->type(), args.grad_type);
  if (dout == nullptr) dout = Filled(b, 0, et, o_dims);
  std::vector<OpBuilder::Operand> forward;
  for (int i = 0; i < op.num_operands(); ++i) forward.push_back(op.operand(i));
  Value* o = op.result(0);
  Value* lse = op.num_results() > 1 ? op.result(1) : nullptr;
  if (lse == nullptr) {
    std::vector<Value*> recomputed = b.Ops(OpKind::kAttention, forward, op.attrs(), 2, {"", ""});
    if (!b.ok()) return b.status();
    o = recomputed[0];
    lse = recomputed[1];
  }
  // attention_grad computes in q's element type: the cotangents' (f32 gradients of a bf16
  // forward convert the forward values).
  Value* v = b.Convert(op.operand(2), et);
  Value* o_in = b.Convert(o, et);
  const std::vector<int64_t> v_dims = op.operand(2)->type().dims();
  if (dlse != nullptr) {
    auto with_column = [&](Value* x, Value* column) {
      AttrDict attrs;
      attrs.Set("dim", Attribute::Int(3));
      return b.Op(OpKind::kConcat, {x, column}, std::move(attrs));
    };
    const std::vector<int64_t> row{o_dims[0], o_dims[1], o_dims[2], 1};
    v = with_column(v, Filled(b, 1, et, {v_dims[0], v_dims[1], v_dims[2], 1}));
    o_in = with_column(o_in, Filled(b, 0, et, row));
    dout = with_column(dout, ReshapeTo(b, b.Convert(dlse, et), row));
  }
  std::vector<OpBuilder::Operand> operands = {b.Convert(op.operand(0), et),
                                              b.Convert(op.operand(1), et),
                                              v,
                                              o_in,
                                              lse,
                                              dout};
  for (int i = 3; i < op.num_operands(); ++i) operands.push_back(op.operand(i));
  std::vector<Value*> grads = b.Ops(OpKind::kAttentionGrad, operands, op.attrs(), 3, {"", "", ""});
  if (!b.ok()) return b.status();
  Value* dv = grads[2];
  if (dlse != nullptr) {
    AttrDict attrs;
    attrs.Set("start", Attribute::IntList({0, 0, 0, 0}));
    attrs.Set("size", Attribute::IntList(v_dims));
    dv = b.Op(OpKind::kSlice, {dv}, std::move(attrs));
  }
  std::vector<Value*> cotangents = {grads[0], grads[1], dv};
  for (int i = 3; i < op.num_operands(); ++i) cotangents.push_back(nullptr);  // positions
  return Finish(b, std::move(cotangents));
}

}  // namespace commir::ops
