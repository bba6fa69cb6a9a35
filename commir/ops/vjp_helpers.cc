#include "commir/ops/vjp_helpers.h"

#include <utility>

namespace commir::ops {

ElementType CotangentElementType(Type type, std::optional<ElementType> grad_type) {
  const ElementType et = type.element_type();
  return grad_type.has_value() && IsFloatType(et) ? *grad_type : et;
}

OpBuilder::Operand PrimalAs(OpBuilder& b, const Operation& op, int i, ElementType et) {
  Value* v = op.operand(i);
  if (v->is_literal()) return OpBuilder::Operand::Literal(v->literal_value(), Type::Scalar(et));
  return b.Convert(v, et);
}

Value* ResultAs(OpBuilder& b, const Operation& op, int i, ElementType et) {
  return b.Convert(op.result(i), et);
}

OpBuilder::Operand Literal(double value, ElementType et) {
  return OpBuilder::Operand::Literal(value, Type::Scalar(et));
}

Value* Filled(OpBuilder& b, double value, ElementType et, const std::vector<int64_t>& dims) {
  AttrDict attrs;
  attrs.Set("value", Attribute::Float(value));
  return b.Op(OpKind::kFull, {}, std::move(attrs), Type::Tensor(et, dims));
}

Value* ReshapeTo(OpBuilder& b, Value* x, const std::vector<int64_t>& dims) {
  if (x == nullptr || x->type().dims() == dims) return x;
  return b.Op(OpKind::kReshape, {x}, {}, Type::Tensor(x->type().element_type(), dims));
}

Value* BroadcastTo(OpBuilder& b, Value* x, const std::vector<int64_t>& dims) {
  if (x == nullptr || x->type().dims() == dims) return x;
  return b.Op(OpKind::kBroadcast, {x}, {}, Type::Tensor(x->type().element_type(), dims));
}

namespace {
Value* ReduceKeep(OpBuilder& b, OpKind kind, Value* x, const std::vector<int64_t>& dims) {
  if (x == nullptr || dims.empty()) return x;
  AttrDict attrs;
  attrs.Set("dims", Attribute::IntList(dims));
  attrs.Set("keepdim", Attribute::Bool(true));
  return b.Op(kind, {x}, std::move(attrs));
}
}  // namespace

Value* SumKeep(OpBuilder& b, Value* x, const std::vector<int64_t>& dims) {
  return ReduceKeep(b, OpKind::kReduceSum, x, dims);
}

Value* MeanKeep(OpBuilder& b, Value* x, const std::vector<int64_t>& dims) {
  return ReduceKeep(b, OpKind::kReduceMean, x, dims);
}

Value* SumToShape(OpBuilder& b, Value* cotangent, const std::vector<int64_t>& dims) {
  if (cotangent == nullptr) return nullptr;
  const std::vector<int64_t>& from = cotangent->type().dims();
  const int64_t lead = static_cast<int64_t>(from.size()) - static_cast<int64_t>(dims.size());
  std::vector<int64_t> summed;
  for (int64_t d = 0; d < static_cast<int64_t>(from.size()); ++d) {
    if (d < lead || (dims[d - lead] == 1 && from[d] != 1)) summed.push_back(d);
  }
  return ReshapeTo(b, SumKeep(b, cotangent, summed), dims);
}

Value* SelectOrZero(OpBuilder& b, Value* cond, Value* a) {
  if (a == nullptr) return nullptr;
  Value* zero = Filled(b, 0, a->type().element_type(), {});
  return b.Op(OpKind::kSelect, {cond, a, zero});
}

Value* ZeroOrSelect(OpBuilder& b, Value* cond, Value* a) {
  if (a == nullptr) return nullptr;
  Value* zero = Filled(b, 0, a->type().element_type(), {});
  return b.Op(OpKind::kSelect, {cond, zero, a});
}

absl::StatusOr<std::vector<Value*>> Finish(OpBuilder& b, std::vector<Value*> cotangents) {
  if (!b.ok()) return b.status();
  return cotangents;
}

}  // namespace commir::ops
