// The derivative of top_k: each value's cotangent goes back to the position it was taken
// from; the indices carry none.
//
// Built from existing ops, without a scatter: a one-hot [..., k, n] of the indices
// (compare with a position iota along n) selects the cotangent at each chosen position,
// and a sum over k gathers it. It costs k x n per row, which is fine for the small k of
// sampling and routing; a scatter_add would make it k per row.
#include "commir/ops/vjp_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

// [0, 1, ..., n - 1] as an i64[n], from `full` and `concat` only (the IR has no iota):
// iota(2m) = concat(iota(m), iota(m) + m), plus one `full` for an odd n, so about
// 3 log2(n) ops whatever n is.
Value* PositionIota(OpBuilder& b, int64_t n) {
  if (n == 1) return Filled(b, 0, ElementType::kI64, {1});
  const int64_t half = n / 2;
  Value* low = PositionIota(b, half);
  Value* high = b.Op(OpKind::kAdd, {low, Literal(static_cast<double>(half), ElementType::kI64)});
  AttrDict concat;
  concat.Set("dim", Attribute::Int(0));
  Value* even = b.Op(OpKind::kConcat, {low, high}, concat);
  if (n % 2 == 0) return even;
  Value* last = Filled(b, static_cast<double>(n - 1), ElementType::kI64, {1});
  return b.Op(OpKind::kConcat, {even, last}, concat);
}

}  // namespace

// dx[..., j] = sum_i g[..., i] * (indices[..., i] == j).
absl::StatusOr<std::vector<Value*>> TopKVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  Value* g = args.result_cotangents[0];
  if (g == nullptr) return std::vector<Value*>{nullptr};  // only the indices were used
  const std::vector<int64_t>& x_dims = op.operand(0)->type().dims();
  const int64_t rank = static_cast<int64_t>(x_dims.size());
  const int64_t n = x_dims.back();
  const int64_t k = op.result(0)->type().dims().back();
  // [..., k, 1] against [n]: the one-hot [..., k, n].
  std::vector<int64_t> column_dims(x_dims.begin(), x_dims.end() - 1);
  column_dims.push_back(k);
  column_dims.push_back(1);
  Value* indices = ReshapeTo(b, op.result(1), column_dims);
  AttrDict eq;
  eq.Set("cmp", Attribute::Ident("eq"));
  Value* one_hot = b.Op(OpKind::kCompare, {indices, PositionIota(b, n)}, std::move(eq));
  Value* picked = SelectOrZero(b, one_hot, ReshapeTo(b, g, column_dims));
  AttrDict sum;
  sum.Set("dims", Attribute::IntList({rank - 1}));
  return Finish(b, {b.Op(OpKind::kReduceSum, {picked}, std::move(sum))});
}

}  // namespace commir::ops
