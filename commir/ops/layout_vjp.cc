// Derivative rules of the layout ops: each moves the cotangent back where the forward
// took its elements from.
#include "commir/ops/vjp_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {

absl::StatusOr<std::vector<Value*>> ReshapeVjp(OpBuilder& b, const VjpArgs& args) {
  return Finish(b, {ReshapeTo(b, args.result_cotangents[0], args.op.operand(0)->type().dims())});
}

// transpose(perm): the cotangent transposed by the inverse permutation.
absl::StatusOr<std::vector<Value*>> TransposeVjp(OpBuilder& b, const VjpArgs& args) {
  const std::vector<int64_t> perm = args.op.RequiredIntListAttr("perm");
  std::vector<int64_t> inverse(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inverse[perm[i]] = static_cast<int64_t>(i);
  AttrDict attrs;
  attrs.Set("perm", Attribute::IntList(inverse));
  return Finish(b, {b.Op(OpKind::kTranspose, {args.result_cotangents[0]}, std::move(attrs))});
}

// slice: the cotangent padded with zeros back to x's shape, one concat per dimension
// the slice cut (CommIR has no pad op).
absl::StatusOr<std::vector<Value*>> SliceVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* padded = args.result_cotangents[0];
  const ElementType et = padded->type().element_type();
  const std::vector<int64_t>& x_dims = op.operand(0)->type().dims();
  const std::vector<int64_t> start = op.RequiredIntListAttr("start");
  const std::vector<int64_t> size = op.RequiredIntListAttr("size");
  for (size_t d = 0; d < x_dims.size() && padded != nullptr; ++d) {
    const int64_t before = start[d];
    const int64_t after = x_dims[d] - start[d] - size[d];
    if (before == 0 && after == 0) continue;
    std::vector<OpBuilder::Operand> parts;
    std::vector<int64_t> zero_dims = padded->type().dims();
    if (before > 0) {
      zero_dims[d] = before;
      parts.push_back(Filled(b, 0, et, zero_dims));
    }
    parts.push_back(padded);
    if (after > 0) {
      zero_dims[d] = after;
      parts.push_back(Filled(b, 0, et, zero_dims));
    }
    AttrDict attrs;
    attrs.Set("dim", Attribute::Int(static_cast<int64_t>(d)));
    padded = b.Op(OpKind::kConcat, std::move(parts), std::move(attrs));
  }
  return Finish(b, {padded});
}

// concat: each operand gets its slice of the cotangent.
absl::StatusOr<std::vector<Value*>> ConcatVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  const int64_t rank = g->type().rank();
  int64_t dim = op.RequiredIntAttr("dim");
  if (dim < 0) dim += rank;
  std::vector<Value*> cotangents;
  int64_t offset = 0;
  for (Value* part : op.operands()) {
    std::vector<int64_t> start(rank, 0);
    start[dim] = offset;
    AttrDict attrs;
    attrs.Set("start", Attribute::IntList(start));
    attrs.Set("size", Attribute::IntList(part->type().dims()));
    cotangents.push_back(b.Op(OpKind::kSlice, {g}, std::move(attrs)));
    offset += part->type().dims()[dim];
  }
  return Finish(b, std::move(cotangents));
}

// broadcast: the cotangent summed over the broadcast dims.
absl::StatusOr<std::vector<Value*>> BroadcastVjp(OpBuilder& b, const VjpArgs& args) {
  return Finish(b, {SumToShape(b, args.result_cotangents[0], args.op.operand(0)->type().dims())});
}

// reshard changes where a value lives, not the value: the cotangent passes through.
absl::StatusOr<std::vector<Value*>> ReshardVjp(OpBuilder& b, const VjpArgs& args) {
  return Finish(b, {args.result_cotangents[0]});
}

}  // namespace commir::ops
