#include "transforms/sharding/zigzag.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "transforms/sharding/layout.h"

namespace commir::sharding {
namespace {

using Operand = OpBuilder::Operand;

Operand Index(int64_t value) {
  return Operand::Literal(static_cast<double>(value), Type::Index());
}

AttrDict DimAttrs(int64_t dim) {
  AttrDict attrs;
  attrs.Set("dim", Attribute::Int(dim));
  return attrs;
}

// Static slice of `x` along `dim`: [start, start + size).
Value* Chunk(OpBuilder& e, Value* x, int64_t dim, int64_t start, int64_t size) {
  std::vector<int64_t> starts(x->type().rank(), 0), sizes = x->type().dims();
  starts[dim] = start;
  sizes[dim] = size;
  AttrDict attrs;
  attrs.Set("start", Attribute::IntList(starts));
  attrs.Set("size", Attribute::IntList(sizes));
  return e.Op(OpKind::kSlice, {x}, std::move(attrs));
}

// The device that holds chunk j in the zigzag layout: j < n ? j : 2n-1-j, computed as
// j + (j div n) * (2n-1-2j).
Value* ZigzagOwner(OpBuilder& e, Value* j, int64_t n) {
  Value* upper = e.Op(OpKind::kDiv, {j, Index(n)});
  Value* twice = e.Op(OpKind::kMul, {j, Index(2)});
  Value* mirror = e.Op(OpKind::kSub, {Index(2 * n - 1), twice});
  Value* jump = e.Op(OpKind::kMul, {upper, mirror});
  return e.Op(OpKind::kAdd, {j, jump});
}

const Operation* DefinedBy(const Value* v, OpKind kind) {
  if (v == nullptr || v->kind() != Value::Kind::kResult) return nullptr;
  const Operation* op = v->defining_op();
  return op->Is(kind) && op->stream_operand() == nullptr ? op : nullptr;
}

}  // namespace

absl::StatusOr<Value*> EmitZigzagExchange(OpBuilder& e, Value* x, int64_t dim, const AxisList& axes,
                                          int64_t n, ZigzagDirection direction) {
  int64_t local = x->type().dims()[dim];
  if (n % 2 != 0 || local % 2 != 0) {
    return absl::UnimplementedError(absl::StrFormat(
        "the zigzag layout over %s (%d devices) cannot be exchanged with the contiguous one: "
        "that needs an even number of devices and of local positions (%d)",
        FormatAxes(axes), n, local));
  }
  int64_t chunk = local / 2;
  Value* rank = e.Op(OpKind::kRank, {}, AxisAttrs(axes));
  // Contiguous block r holds chunks 2r (even) and 2r+1 (odd); zigzag device r holds
  // chunks r and 2n-1-r (mirror). Chunk j lives on device j div 2 in the contiguous
  // layout and on ZigzagOwner(j) in the zigzag one.
  Value* even = e.Op(OpKind::kMul, {rank, Index(2)});
  Value* odd = e.Op(OpKind::kAdd, {even, Index(1)});
  Value* mirror = e.Op(OpKind::kSub, {Index(2 * n - 1), rank});
  Value* half_rank = e.Op(OpKind::kDiv, {rank, Index(2)});
  Value* half_mirror = e.Op(OpKind::kDiv, {mirror, Index(2)});
  Value* owner_even = ZigzagOwner(e, even, n);
  Value* owner_odd = ZigzagOwner(e, odd, n);
  bool to_zigzag = direction == ZigzagDirection::kToZigzag;
  // Where this device's two chunks go, and where the two it keeps come from.
  Value* send_a = to_zigzag ? owner_even : half_rank;
  Value* send_b = to_zigzag ? owner_odd : half_mirror;
  Value* from_a = to_zigzag ? half_rank : owner_even;
  Value* from_b = to_zigzag ? half_mirror : owner_odd;

  Value* a = Chunk(e, x, dim, 0, chunk);
  Value* b = Chunk(e, x, dim, chunk, chunk);
  if (!e.ok()) return e.status();
  std::vector<int64_t> dims = x->type().dims();
  dims[dim] = n * chunk;
  AttrDict zero;
  zero.Set("value", Attribute::Float(0.0));
  Value* buffer = e.Op(OpKind::kFull, {}, std::move(zero), x->type().WithDims(dims));
  Value* offset_a = e.Op(OpKind::kMul, {send_a, Index(chunk)});
  Value* offset_b = e.Op(OpKind::kMul, {send_b, Index(chunk)});
  buffer = e.Op(OpKind::kDynamicUpdateSlice, {buffer, a, offset_a}, DimAttrs(dim));
  buffer = e.Op(OpKind::kDynamicUpdateSlice, {buffer, b, offset_b}, DimAttrs(dim));
  AttrDict a2a = AxisAttrs(axes);
  a2a.Set("split_dim", Attribute::Int(dim));
  a2a.Set("concat_dim", Attribute::Int(dim));
  Value* received = e.Op(OpKind::kAllToAll, {buffer}, std::move(a2a));
  AttrDict take = DimAttrs(dim);
  take.Set("size", Attribute::Int(chunk));
  Value* got_a =
      e.Op(OpKind::kDynamicSlice, {received, e.Op(OpKind::kMul, {from_a, Index(chunk)})}, take);
  Value* got_b =
      e.Op(OpKind::kDynamicSlice, {received, e.Op(OpKind::kMul, {from_b, Index(chunk)})}, take);
  Value* out = e.Op(OpKind::kConcat, {got_a, got_b}, DimAttrs(dim),
                    std::nullopt, to_zigzag ? "zz" : "contig");
  if (!e.ok()) return e.status();
  return out;
}

std::optional<ZigzagExchange> MatchZigzagExchange(const Value* v, int64_t dim, const AxisList& axes,
                                                  ZigzagDirection direction) {
  const Operation* concat = DefinedBy(v, OpKind::kConcat);
  if (concat == nullptr || concat->num_operands() != 2 || concat->attrs().GetInt("dim", -1) != dim) {
    return std::nullopt;
  }
  const Operation* got_a = DefinedBy(concat->operand(0), OpKind::kDynamicSlice);
  const Operation* got_b = DefinedBy(concat->operand(1), OpKind::kDynamicSlice);
  if (got_a == nullptr || got_b == nullptr || got_a->operand(0) != got_b->operand(0)) return std::nullopt;
  const Operation* a2a = DefinedBy(got_a->operand(0), OpKind::kAllToAll);
  if (a2a == nullptr || a2a->attrs().Find("axis") == nullptr ||
      a2a->attrs().Find("axis")->axes() != axes || a2a->attrs().GetInt("split_dim", -1) != dim ||
      a2a->attrs().GetInt("concat_dim", -1) != dim) {
    return std::nullopt;
  }
  const Operation* write_b = DefinedBy(a2a->operand(0), OpKind::kDynamicUpdateSlice);
  const Operation* write_a = write_b ? DefinedBy(write_b->operand(0), OpKind::kDynamicUpdateSlice) : nullptr;
  if (write_a == nullptr || DefinedBy(write_a->operand(0), OpKind::kFull) == nullptr) return std::nullopt;
  const Operation* a = DefinedBy(write_a->operand(1), OpKind::kSlice);
  const Operation* b = DefinedBy(write_b->operand(1), OpKind::kSlice);
  if (a == nullptr || b == nullptr || a->operand(0) != b->operand(0)) return std::nullopt;
  Value* x = a->operand(0);
  int64_t chunk = x->type().dims()[dim] / 2;
  if (v->type() != x->type() || a->result(0)->type().dims()[dim] != chunk) return std::nullopt;
  // The direction shows in where the first chunk goes: device r div 2 (a `div`) when
  // leaving the zigzag layout, ZigzagOwner(2r) (an `add`) when entering it.
  const Operation* offset = DefinedBy(write_a->operand(2), OpKind::kMul);
  OpKind destination = direction == ZigzagDirection::kToContiguous ? OpKind::kDiv : OpKind::kAdd;
  if (offset == nullptr || DefinedBy(offset->operand(0), destination) == nullptr) return std::nullopt;
  ZigzagExchange found;
  found.source = x;
  found.chunks[0] = a;
  found.chunks[1] = b;
  return found;
}

}  // namespace commir::sharding
