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

// The one place attention's derivative goes: the flash-style `attention_grad` op (q, k,
// v, o, lse, dout -> dq, dk, dv) is on its way; until then attention is refused.
absl::StatusOr<std::vector<Value*>> AttentionVjp(OpBuilder&, const VjpArgs&) {
  return absl::UnimplementedError("no derivative rule for 'attention' yet");
}

}  // namespace commir::ops
