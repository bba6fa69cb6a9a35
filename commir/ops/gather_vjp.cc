// Derivative rules of gather and scatter_add: each is the other's adjoint, so each rule
// moves the cotangent back with the other op; the integer indices carry no cotangent.
#include "commir/ops/gather_ops.h"
#include "commir/ops/vjp_helpers.h"

namespace commir::ops {
namespace {

AttrDict AxisOf(const Operation& op) {
  AttrDict attrs;
  attrs.Set("axis", Attribute::Int(op.RequiredIntAttr("axis")));
  return attrs;
}

}  // namespace

// d table = scatter_add(zeros like table, indices, g): every looked-up row receives the
// cotangents of the places it was copied to, summed where an index repeats.
absl::StatusOr<std::vector<Value*>> GatherVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  Value* zeros = Filled(b, 0, g->type().element_type(), op.operand(0)->type().dims());
  Value* d_table = b.Op(OpKind::kScatterAdd, {zeros, op.operand(1), g}, AxisOf(op));
  std::vector<Value*> cotangents = {d_table, nullptr};
  if (op.num_operands() == 3) cotangents.push_back(nullptr);  // the offset, an index
  return Finish(b, std::move(cotangents));
}

// scatter_add is linear: the base's cotangent is g itself, the updates' is g read back at
// the rows each update was added to.
absl::StatusOr<std::vector<Value*>> ScatterAddVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  std::vector<OpBuilder::Operand> read = {g, op.operand(1)};
  if (op.num_operands() == 4) read.push_back(op.operand(3));  // the block's offset
  Value* d_updates = b.Op(OpKind::kGather, read, AxisOf(op));
  std::vector<Value*> cotangents = {g, nullptr, d_updates};
  if (op.num_operands() == 4) cotangents.push_back(nullptr);
  return Finish(b, std::move(cotangents));
}

}  // namespace commir::ops
