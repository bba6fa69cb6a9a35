// Derivative rules of moe_dispatch and moe_collect: both copy rows between the same
// (token, choice) <-> (expert, slot) pairs, so each is linear and the other's adjoint;
// each rule moves the cotangent back with the other op. The routing indices carry none.
#include "commir/ops/moe_ops.h"
#include "commir/ops/vjp_helpers.h"

namespace commir::ops {

// d rows[t, j] = g[slot of (t, j)], zero for a dropped choice: moe_collect of g. Rows
// shared by a token's k choices ([tokens, hidden]) add the k cotangents.
absl::StatusOr<std::vector<Value*>> MoeDispatchVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  // The same groups place the choices where the forward put them.
  AttrDict groups;
  if (const Attribute* g = op.attrs().Find("groups"); g != nullptr) groups.Set("groups", *g);
  Value* collected =
      b.Op(OpKind::kMoeCollect, {args.result_cotangents[0], op.operand(1)}, std::move(groups));
  Value* d_rows = collected;
  if (op.operand(0)->type().rank() == 2) {
    AttrDict sum;
    sum.Set("dims", Attribute::IntList({1}));
    d_rows = b.Op(OpKind::kReduceSum, {collected}, std::move(sum));
  }
  return Finish(b, {d_rows, nullptr});
}

// d buffer[e, c] = g[the choice that holds slot (e, c)], zero for an empty slot: the
// moe_dispatch of g's per-choice rows into a buffer of the collected buffer's shape.
absl::StatusOr<std::vector<Value*>> MoeCollectVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  const std::vector<int64_t>& buffer = op.operand(0)->type().dims();
  // The verifier checked that the groups divide the buffer's columns.
  const int64_t groups = op.attrs().GetInt("groups", 1);
  AttrDict shape;
  shape.Set("experts", Attribute::Int(buffer[0]));
  shape.Set("capacity", Attribute::Int(buffer[1] / groups));
  if (groups != 1) shape.Set("groups", Attribute::Int(groups));
  Value* d_buffer =
      b.Op(OpKind::kMoeDispatch, {args.result_cotangents[0], op.operand(1)}, std::move(shape));
  return Finish(b, {d_buffer, nullptr});
}

}  // namespace commir::ops
