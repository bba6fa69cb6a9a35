// Which ops of a gradient function recompute its forward, by identity rather than by
// value name.
//
// autodiff's @f_grad takes @f's arguments first, recomputes @f's ops before its
// backward and returns @f's results first; the spmd pipeline and the schedule passes
// then rewrite @f and @f_grad alike. Afterwards an op of @f_grad is part of its forward
// when either
//  * it computes something @f's results are computed from: the return's leading
//    operands and, transitively, what they are made of. This holds however the
//    partitioner lowered the copy (it may choose another strategy for an op of @f_grad
//    than for the same op of @f, as the backward's users change what is cheapest);
//  * or it is an op of @f recomputed: the same op (kind, attributes, result types,
//    regions) on the copies of the same operands, starting from the shared arguments,
//    the identity the structural fingerprint (commir/fingerprint.h) gives values (where
//    they are defined, not what they are called). This finds the forward values @f's
//    results do not need but its backward does (ring attention's combined log-sum-exp).
//    The copy may return more than the op (autodiff's copy of an attention also returns
//    the log-sum-exp its backward reads).
// Value names cannot serve: the partitioner gives several values one name, reshards it
// adds to the copy are named apart from @f's, and a backward value may be named like a
// forward one.
//
// Only top-level ops are classified; an op inside a region belongs to its top-level
// op's side. Two identical ops of @f (which CSE leaves apart only when marked, e.g. for
// remat) match @f_grad's in order.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_FORWARD_COPY_H_
#define COMMIR_TRANSFORMS_AUTODIFF_FORWARD_COPY_H_

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "commir/ir.h"

namespace commir {

struct ForwardCopy {
  // The top-level ops of the gradient function in its forward part (see above).
  absl::flat_hash_set<const Operation*> forward_part;
  // Of those, each one that recomputes an op of the forward as it is, with that op.
  absl::flat_hash_map<const Operation*, const Operation*> ops;
  // Each value of the gradient function that stands for a value of the forward (the
  // shared arguments and the results of the ops above), with that value. A result the
  // copy returns beyond its forward op's is in neither function's map.
  absl::flat_hash_map<const Value*, const Value*> values;

  // Whether `op` (at any depth) is part of the recomputed forward.
  bool Recomputes(const Operation* op) const;
};

ForwardCopy MatchForwardCopy(const Function& forward, const Function& gradient);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_FORWARD_COPY_H_
