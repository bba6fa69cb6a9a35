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
// differentiated attention always does); otherwise the forward is run again with lse. A gradient
// through lse itself (a program that uses lse beyond the merge of partial results) is
// refused: attention_grad takes only the output's cotangent.
absl::StatusOr<std::vector<Value*>> AttentionVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  if (args.result_cotangents.size() > 1 && args.result_cotangents[1] != nullptr) {
    return absl::UnimplementedError(
        "no derivative rule for a gradient through attention's lse (only through its output)");
  }
  Value* dout = args.result_cotangents[0];
  if (dout == nullptr) return absl::InvalidArgumentError("attention without an output cotangent");
  const ElementType et = dout->type().element_type();
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
  std::vector<OpBuilder::Operand> operands = {b.Convert(op.operand(0), et), b.Convert(op.operand(1), et),
                                              b.Convert(op.operand(2), et), b.Convert(o, et), lse, dout};
  for (int i = 3; i < op.num_operands(); ++i) operands.push_back(op.operand(i));
  std::vector<Value*> grads = b.Ops(OpKind::kAttentionGrad, operands, op.attrs(), 3, {"", "", ""});
  if (!b.ok()) return b.status();
  std::vector<Value*> cotangents = {grads[0], grads[1], grads[2]};
  for (int i = 3; i < op.num_operands(); ++i) cotangents.push_back(nullptr);  // positions
  return Finish(b, std::move(cotangents));
}

}  // namespace commir::ops
