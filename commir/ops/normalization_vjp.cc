// Derivative rules of the reductions, softmax and the norms. The norms' statistics are
// recomputed from x in the backward (in the cotangent's element type) rather than kept
// from the forward, which does not expose them.
#include <algorithm>

#include "commir/ops/vjp_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

using Operand = OpBuilder::Operand;

int64_t Normalized(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

Value* Mul(OpBuilder& b, Operand x, Operand y) { return b.Op(OpKind::kMul, {x, y}); }
Value* Sub(OpBuilder& b, Operand x, Operand y) { return b.Op(OpKind::kSub, {x, y}); }

}  // namespace

// reduce_sum: g broadcast back over the reduced dims; reduce_mean: also divided by their
// count; reduce_max: g to the elements equal to the maximum (every one of a tie).
absl::StatusOr<std::vector<Value*>> ReduceVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  const ElementType et = g->type().element_type();
  const std::vector<int64_t>& x_dims = op.operand(0)->type().dims();
  const int64_t rank = static_cast<int64_t>(x_dims.size());
  std::vector<int64_t> kept_dims = x_dims;
  int64_t count = 1;
  for (int64_t d : op.RequiredIntListAttr("dims")) {
    const int64_t n = Normalized(d, rank);
    count *= x_dims[n];
    kept_dims[n] = 1;
  }
  Value* g_full = BroadcastTo(b, ReshapeTo(b, g, kept_dims), x_dims);
  switch (op.kind()) {
    case OpKind::kReduceSum:
      return Finish(b, {g_full});
    case OpKind::kReduceMean:
      return Finish(b, {Mul(b, g_full, Literal(1.0 / static_cast<double>(count), et))});
    default: {
      Value* y_full = BroadcastTo(b, ReshapeTo(b, ResultAs(b, op, 0, et), kept_dims), x_dims);
      AttrDict eq;
      eq.Set("cmp", Attribute::Ident("eq"));
      Value* is_max = b.Op(OpKind::kCompare, {PrimalAs(b, op, 0, et), y_full}, std::move(eq));
      return Finish(b, {SelectOrZero(b, is_max, g_full)});
    }
  }
}

// y = softmax(x): dx = y (g - sum(g y)) along dim.
absl::StatusOr<std::vector<Value*>> SoftmaxVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  const ElementType et = g->type().element_type();
  const int64_t dim = Normalized(op.IntAttr("dim"), op.operand(0)->type().rank());
  Value* y = ResultAs(b, op, 0, et);
  Value* dot = SumKeep(b, Mul(b, g, y), {dim});
  return Finish(b, {Mul(b, y, Sub(b, g, dot))});
}

namespace {

// Weight (and bias) cotangent: `per_element` summed over every dim but the last.
Value* FeatureSum(OpBuilder& b, Value* per_element, int64_t feature_count) {
  return SumToShape(b, per_element, {feature_count});
}

}  // namespace

// layernorm: xhat = (x - mean) rstd, y = xhat w + b. With dxhat = g w:
// dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)), dw = sum(g xhat), db = sum(g).
absl::StatusOr<std::vector<Value*>> LayerNormVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  const ElementType et = g->type().element_type();
  const std::vector<int64_t>& x_dims = op.operand(0)->type().dims();
  const int64_t last = static_cast<int64_t>(x_dims.size()) - 1;
  Value* x = b.Convert(op.operand(0), et);
  Value* w = b.Convert(op.operand(1), et);
  Value* centered = Sub(b, x, MeanKeep(b, x, {last}));
  Value* var = MeanKeep(b, Mul(b, centered, centered), {last});
  Value* rstd =
      b.Op(OpKind::kRsqrt, {b.Op(OpKind::kAdd, {var, Literal(op.NumberAttr("eps"), et)})});
  Value* xhat = Mul(b, centered, rstd);
  Value* dxhat = Mul(b, g, w);
  Value* dx = Mul(b, rstd,
                  Sub(b, Sub(b, dxhat, MeanKeep(b, dxhat, {last})),
                      Mul(b, xhat, MeanKeep(b, Mul(b, dxhat, xhat), {last}))));
  return Finish(b,
                {dx, FeatureSum(b, Mul(b, g, xhat), x_dims[last]), FeatureSum(b, g, x_dims[last])});
}

// rmsnorm: r = rsqrt(mean(x^2) + eps), xhat = x r, y = xhat w. With dxhat = g w:
// dx = r (dxhat - xhat mean(dxhat xhat)), dw = sum(g xhat).
absl::StatusOr<std::vector<Value*>> RmsNormVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  const ElementType et = g->type().element_type();
  const std::vector<int64_t>& x_dims = op.operand(0)->type().dims();
  const int64_t last = static_cast<int64_t>(x_dims.size()) - 1;
  Value* x = b.Convert(op.operand(0), et);
  Value* w = b.Convert(op.operand(1), et);
  Value* ms = MeanKeep(b, Mul(b, x, x), {last});
  Value* r = b.Op(OpKind::kRsqrt, {b.Op(OpKind::kAdd, {ms, Literal(op.NumberAttr("eps"), et)})});
  Value* xhat = Mul(b, x, r);
  Value* dxhat = Mul(b, g, w);
  Value* dx = Mul(b, r, Sub(b, dxhat, Mul(b, xhat, MeanKeep(b, Mul(b, dxhat, xhat), {last}))));
  return Finish(b, {dx, FeatureSum(b, Mul(b, g, xhat), x_dims[last])});
}

}  // namespace commir::ops
