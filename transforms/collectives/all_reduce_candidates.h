// The all_reduces of one block as AssignBuckets' candidates (collective_buckets.h): which
// ones combine-all-reduces may combine, their keys, bytes, and the positions where each
// operand is ready and each result first needed.
//
// The positions are not the block's program order. lower-to-spmd emits a gradient's
// all_reduce right before the op that first needs it, so a training step reads
//   ar(g1); update(w1); g2' = lr*g2; ar(g2'); update(w2); ...
// and in program order every all_reduce is needed before the next one's operand is made:
// no two could ever share a point. The update of w1 does not depend on g2, though.
// Positions are taken in the order that sorts ops by their collective round (how many
// candidate all_reduces lie on the longest chain of data dependences into the op), then
// by program order: a topological order (an op's operands come from earlier rounds or
// earlier in its own round) in which every all_reduce of round r has its operand before
// any all_reduce of round r is read. So all_reduces that depend on none of each other's
// results (the gradients of one backward pass, clip_grad_norm's per-parameter squared
// norms) can share a bucket, and all_reduces one of which feeds the other (a forward
// pass's tensor-parallel all_reduces, layer after layer) cannot. The rewrite
// (combine_all_reduces.h) then moves only the readers it must.
#ifndef COMMIR_TRANSFORMS_COLLECTIVES_ALL_REDUCE_CANDIDATES_H_
#define COMMIR_TRANSFORMS_COLLECTIVES_ALL_REDUCE_CANDIDATES_H_

#include <vector>

#include "absl/functional/function_ref.h"
#include "commir/ir.h"
#include "transforms/collectives/collective_buckets.h"

namespace commir::collectives {

struct AllReduceCandidates {
  // The all_reduces that may be combined, in program order.
  std::vector<Operation*> ops;
  // One per op: positions in the round order above, bytes per device, and a key equal
  // for two all_reduces exactly when one all_reduce can serve both (the same reduction,
  // axes, element type and every other attribute: stream, remat mark).
  std::vector<BucketCandidate> candidates;
};

// The all_reduces of `block` (not of blocks nested in it) whose result is read, whose
// operand is a non-empty tensor value and whose stream, if any, is a constant. Others
// are left as they are.
AllReduceCandidates CollectAllReduceCandidates(const Block& block);

// The op of `block` that is `op` or holds it in a region; null when `op` is not in
// `block` (an op of an enclosing block).
Operation* AncestorInBlock(Operation* op, const Block& block);

// Calls `fn` with every value `op` reads: its operands (the stream operand included)
// and those of every op nested in its regions.
void ForEachValueRead(const Operation& op, absl::FunctionRef<void(Value*)> fn);

}  // namespace commir::collectives

#endif  // COMMIR_TRANSFORMS_COLLECTIVES_ALL_REDUCE_CANDIDATES_H_
