#include "transforms/schedules/ring_zigzag.h"

#include <algorithm>
#include <optional>

#include "transforms/schedules/attention_match.h"
#include "transforms/sharding/zigzag.h"

namespace commir::schedules {
namespace {

// As the ring (ring_attention.cc): communication on stream 1.
constexpr int64_t kCommStream = 1;

}  // namespace

// Static slice of `x` along the sequence (dim 2): [start, start + size).
Value* SequenceSlice(OpBuilder& e, Value* x, int64_t start, int64_t size, const std::string& name) {
  if (x == nullptr) return nullptr;
  std::vector<int64_t> starts(x->type().rank(), 0), sizes = x->type().dims();
  starts[2] = start;
  sizes[2] = size;
  return e.Op(OpKind::kSlice, {x}, SliceAttrs(starts, sizes), std::nullopt, name);
}

// The device that holds chunk j (an index value) in the zigzag layout:
// j < n ? j : 2n-1-j, as j + (j div n) * (2n-1-2j).
Value* ZigzagPermutation::ZigzagOwner(Value* j) {
  Value* upper = e_.Op(OpKind::kDiv, {j, IndexLiteral(n_)});
  Value* twice = e_.Op(OpKind::kMul, {j, IndexLiteral(2)});
  Value* mirror = e_.Op(OpKind::kSub, {IndexLiteral(2 * n_ - 1), twice});
  Value* jump = e_.Op(OpKind::kMul, {upper, mirror});
  return e_.Op(OpKind::kAdd, {j, jump});
}

// 2n-1-r: the chunk a device holds in the second half of the sequence.
Value* ZigzagPermutation::MirrorRank() {
  if (mirror_rank_ == nullptr) {
    mirror_rank_ = e_.Op(OpKind::kSub, {IndexLiteral(2 * n_ - 1), rank_}, {}, std::nullopt, "mirror");
  }
  return mirror_rank_;
}

// slot * chunk, made once per (slot, chunk) for the permutations of q, k, v and o.
Value* ZigzagPermutation::Offset(Value* slot, int64_t chunk) {
  Value*& offset = offsets_[{slot, chunk}];
  if (offset == nullptr) offset = e_.Op(OpKind::kMul, {slot, IndexLiteral(chunk)});
  return offset;
}

// Writes two chunks of `chunk` elements into a zero buffer of n slots at the slots
// `slot_a` and `slot_b` (index values), exchanges the buffers with one all_to_all (slot j
// goes to device j), and reads the received slots `from_a` and `from_b` back into one
// value [a, b]: a permutation of chunks in which each device sends one chunk to each of
// at most two others.
Value* ZigzagPermutation::Exchange(Value* a, Value* b, Value* slot_a, Value* slot_b, Value* from_a, Value* from_b,
                int64_t chunk, const std::string& name) {
  if (!e_.ok()) return nullptr;
  std::vector<int64_t> dims = a->type().dims();
  dims[2] = n_ * chunk;
  AttrDict zero;
  zero.Set("value", Attribute::Float(0.0));
  Value* buffer = e_.Op(OpKind::kFull, {}, std::move(zero), a->type().WithDims(dims));
  buffer = e_.Op(OpKind::kDynamicUpdateSlice, {buffer, a, Offset(slot_a, chunk)}, DimAttrs(2));
  buffer = e_.Op(OpKind::kDynamicUpdateSlice, {buffer, b, Offset(slot_b, chunk)}, DimAttrs(2));
  AttrDict a2a = CollectiveAttrs(axes_, kCommStream);
  a2a.Set("split_dim", Attribute::Int(2));
  a2a.Set("concat_dim", Attribute::Int(2));
  Value* received = e_.Op(OpKind::kAllToAll, {buffer}, std::move(a2a));
  AttrDict take = DimAttrs(2);
  take.Set("size", Attribute::Int(chunk));
  Value* got_a = e_.Op(OpKind::kDynamicSlice, {received, Offset(from_a, chunk)}, take);
  Value* got_b = e_.Op(OpKind::kDynamicSlice, {received, Offset(from_b, chunk)}, take);
  return e_.Op(OpKind::kConcat, {got_a, got_b}, DimAttrs(2), std::nullopt, name);
}

// Contiguous block r (chunks 2r, 2r+1) -> zigzag (chunks r, 2n-1-r): chunk 2r goes to
// device owner(2r), chunk 2r+1 to owner(2r+1); chunk r comes from device r div 2,
// chunk 2n-1-r from device (2n-1-r) div 2.
Value* ZigzagPermutation::ToZigzag(Value* x, int64_t chunk, const std::string& name) {
  if (half_rank_ == nullptr) ZigzagIndices();
  Value* first = SequenceSlice(e_, x, 0, chunk, "");
  Value* second = SequenceSlice(e_, x, chunk, chunk, "");
  return Exchange(first, second, owner_even_, owner_odd_, half_rank_, half_mirror_, chunk, name);
}

// Zigzag (chunks r, 2n-1-r) -> contiguous block r (chunks 2r, 2r+1): the inverse.
Value* ZigzagPermutation::FromZigzag(Value* x, int64_t chunk, const std::string& name) {
  Value* first = SequenceSlice(e_, x, 0, chunk, "");
  Value* second = SequenceSlice(e_, x, chunk, chunk, "");
  return Exchange(first, second, half_rank_, half_mirror_, owner_even_, owner_odd_, chunk, name);
}

// The device indices both permutations use, computed once.
void ZigzagPermutation::ZigzagIndices() {
  Value* even = e_.Op(OpKind::kMul, {rank_, IndexLiteral(2)});
  Value* odd = e_.Op(OpKind::kAdd, {even, IndexLiteral(1)});
  owner_even_ = ZigzagOwner(even);
  owner_odd_ = ZigzagOwner(odd);
  half_rank_ = e_.Op(OpKind::kDiv, {rank_, IndexLiteral(2)});
  half_mirror_ = e_.Op(OpKind::kDiv, {MirrorRank(), IndexLiteral(2)});
}

// `x` (a contiguous block) in the zigzag layout. When lower-to-spmd made `x` from a
// zigzag value (a function that declares the zigzag layout), that value itself: the
// two permutations cancel and cost nothing.
Value* ZigzagPermutation::ZigzagOf(Value* x, int64_t chunk, const std::string& name) {
  std::optional<sharding::ZigzagExchange> exchange =
      sharding::MatchZigzagExchange(x, 2, axes_, sharding::ZigzagDirection::kToContiguous);
  if (exchange.has_value()) return exchange->source;
  return ToZigzag(x, chunk, name);
}

// The attention result `result` replaced by `zigzag` (the ring's result, in the zigzag
// layout): a later exchange of `result` into the zigzag layout (what lower-to-spmd
// emits for a zigzag result) takes `zigzag` directly and is erased; other users get
// `zigzag` permuted back to contiguous. Returns what replaces `result`'s remaining
// uses, or null when none is left.
Value* ZigzagPermutation::ContiguousFor(Value* result, Value* zigzag, int64_t chunk,
                     std::vector<Operation*>* rewritten) {
  if (!e_.ok()) return nullptr;
  std::vector<const Operation*> exchange_chunks;
  // Users are copied: replacing uses edits the list.
  std::vector<Operation*> users(result->users().begin(), result->users().end());
  for (Operation* user : users) {
    if (!user->Is(OpKind::kSlice)) continue;
    // The exchange's result is the concat the chunks finally feed; look at the ops
    // after the user for it (the exchange is emitted in one run after the attention).
    for (Operation* op = user->next(); op != nullptr; op = op->next()) {
      if (!op->Is(OpKind::kConcat)) continue;
      std::optional<sharding::ZigzagExchange> exchange = sharding::MatchZigzagExchange(
          op->result(0), 2, axes_, sharding::ZigzagDirection::kToZigzag);
      if (!exchange.has_value() || exchange->source != result) continue;
      zigzag->set_name(op->result(0)->name());
      op->result(0)->ReplaceAllUsesWith(zigzag);
      rewritten->push_back(op);
      exchange_chunks.push_back(exchange->chunks[0]);
      exchange_chunks.push_back(exchange->chunks[1]);
      break;
    }
    if (!exchange_chunks.empty()) break;
  }
  bool other_users = false;
  for (Operation* user : result->users()) {
    other_users |= std::find(exchange_chunks.begin(), exchange_chunks.end(), user) ==
                   exchange_chunks.end();
  }
  if (!other_users) return nullptr;
  if (half_rank_ == nullptr) ZigzagIndices();
  return FromZigzag(zigzag, chunk, "");
}

}  // namespace commir::schedules
