// Which independent collectives one combined collective can serve: the grouping that
// XLA's all-reduce combiner and PyTorch DDP's gradient buckets make, as a pure function
// of where each collective's operand is ready and where its result is first needed.
//
// Shared by the pass that combines the all_reduces of a lowered program
// (combine-all-reduces) and by propagate-sharding's plan cost, so that the latency the
// partitioner charges for a plan's gradient all_reduces is the latency of the combined
// collectives the default spmd pipeline, which ends with combine-all-reduces, runs.
// (The plan search's layer cost partitions without it, kPartitionPipeline: it reads
// each weight's own gradient all_reduce.)
#ifndef COMMIR_TRANSFORMS_COLLECTIVES_COLLECTIVE_BUCKETS_H_
#define COMMIR_TRANSFORMS_COLLECTIVES_COLLECTIVE_BUCKETS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace commir::collectives {

// The bucket size DDP and the combine-all-reduces pass use by default: PyTorch DDP's
// bucket_cap_mb of 25 MiB (XLA's GPU all-reduce combiner defaults to 30 MiB).
inline constexpr double kDefaultBucketBytes = 25.0 * (1 << 20);

// One collective, by positions in its block's program order.
struct BucketCandidate {
  // The position of the op that makes the collective's operand (-1: a block argument).
  // The combined collective can run only after it.
  int ready = -1;
  // The position of the first op that reads the collective's result (the block's
  // length for the terminator). The combined collective must run before it.
  int needed = 0;
  // Bytes of the operand per device (what the combined buffer holds for it).
  double bytes = 0;
  // Collectives combine only with others of the same key (op kind, reduction, mesh axes
  // and element type: one buffer, one collective).
  int64_t key = 0;
};

// Where a bucket's combined collective goes and who is in it.
struct Bucket {
  // Its members, as indices into the candidates, in the order given.
  std::vector<int> members;
  // The combined collective runs after the op at this position (the latest `ready` of
  // its members: as early as all operands exist, so it overlaps what follows) and
  // before the op at `needed` (the earliest `needed` of its members).
  int after = -1;
  int needed = 0;
  double bytes = 0;
};

// Groups `candidates` into the fewest buckets, for each key, whose members can all run
// at one point (each member's `ready` < the bucket's `needed`) and whose bytes stay
// within `threshold_bytes` (a collective larger than the threshold goes alone).
// Candidates are taken in order of `needed` (then `ready`, then index) and each bucket
// is closed at the first that cannot join it: the earliest-deadline greedy, which
// stabs intervals with the fewest points when no threshold binds. A candidate with
// ready >= needed (malformed) goes alone. Deterministic; O(n log n).
std::vector<Bucket> AssignBuckets(absl::Span<const BucketCandidate> candidates,
                                  double threshold_bytes);

}  // namespace commir::collectives

#endif  // COMMIR_TRANSFORMS_COLLECTIVES_COLLECTIVE_BUCKETS_H_
