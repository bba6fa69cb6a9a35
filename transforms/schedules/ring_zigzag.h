// The zigzag layout of a ring (ring_attention.h): device r of n holds sequence chunks r
// and 2n-1-r of 2n. These permute values between a contiguous block per device and that
// layout, one all_to_all each (stream 1), for the forward and the backward ring alike.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_RING_ZIGZAG_H_
#define COMMIR_TRANSFORMS_SCHEDULES_RING_ZIGZAG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "commir/ir.h"
#include "commir/type.h"

namespace commir::schedules {

// Static slice of `x` along the sequence (dim 2): [start, start + size); null for null.
Value* SequenceSlice(OpBuilder& e, Value* x, int64_t start, int64_t size, const std::string& name);

class ZigzagPermutation {
 public:
  // Emits with `e` (at the ring's position); `rank` is rank(axes), n the group size.
  ZigzagPermutation(OpBuilder& e, Value* rank, int64_t n, AxisList axes)
      : e_(e), rank_(rank), n_(n), axes_(std::move(axes)) {}

  // 2n-1-r: the chunk a device holds in the second half of the sequence.
  Value* MirrorRank();

  // `x` (a contiguous block of two chunks of `chunk` elements along dim 2) in the zigzag
  // layout. When lower-to-spmd made `x` from a zigzag value (a function that declares
  // the zigzag layout), that value itself: the two permutations cancel and cost nothing.
  Value* ZigzagOf(Value* x, int64_t chunk, const std::string& name);

  // The value `result` (of an op the ring replaces) replaced by `zigzag` (the ring's
  // result, in the zigzag layout): a later exchange of `result` into the zigzag layout
  // (what lower-to-spmd emits for a zigzag result) takes `zigzag` directly and is
  // appended to `rewritten`; other users get `zigzag` permuted back to contiguous.
  // Returns what replaces `result`'s remaining uses, or null when none is left.
  Value* ContiguousFor(Value* result, Value* zigzag, int64_t chunk,
                       std::vector<Operation*>* rewritten);

 private:
  Value* ZigzagOwner(Value* j);
  Value* Offset(Value* slot, int64_t chunk);
  Value* Exchange(Value* a, Value* b, Value* slot_a, Value* slot_b, Value* from_a, Value* from_b,
                  int64_t chunk, const std::string& name);
  Value* ToZigzag(Value* x, int64_t chunk, const std::string& name);
  Value* FromZigzag(Value* x, int64_t chunk, const std::string& name);
  void ZigzagIndices();

  OpBuilder& e_;
  Value* rank_;
  int64_t n_;
  AxisList axes_;
  Value* mirror_rank_ = nullptr;
  absl::flat_hash_map<std::pair<Value*, int64_t>, Value*> offsets_;
  Value* owner_even_ = nullptr;
  Value* owner_odd_ = nullptr;
  Value* half_rank_ = nullptr;
  Value* half_mirror_ = nullptr;
};

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_RING_ZIGZAG_H_
