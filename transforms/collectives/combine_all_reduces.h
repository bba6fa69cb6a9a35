// combine-all-reduces{threshold-bytes=N}: one all_reduce for many, as production data
// parallelism runs them. PyTorch DDP packs gradients into buckets of bucket_cap_mb = 25
// MiB and all-reduces each bucket once; XLA's AllReduceCombiner merges independent
// all-reduces of the same reduction and replica groups up to a byte threshold (30 MiB
// on GPU). A lowered training step has one all_reduce per gradient, each paying a
// collective's latency (tens of microseconds for a small message: calibration.md, NCCL's
// tuning model); combined, the latency is paid once per bucket.
//
// In every block of every spmd function (loop bodies included, each on its own), the
// all_reduces of all_reduce_candidates.h are grouped by AssignBuckets (the one
// definition of the grouping, which the partitioner's plan cost uses too). For a bucket
// of two or more, right after the op that makes the last member's operand:
//   each operand reshaped to 1-D (a view), one `concat` along dim 0, ONE `all_reduce`
//   with the members' attributes, and per member a `slice` of its range and a `reshape`
//   back to its type,
// which replace the members' results. Readers of a member placed before that point (the
// update of one weight, emitted before the next gradient is scaled) move right after
// the combined all_reduce, with the ops that depend on them; nothing else moves. A
// bucket of one is left as it is.
//
// Summing a concatenated buffer sums each element of it over the same devices in the
// same order as its own all_reduce did, so the combined program computes bit for bit
// what the uncombined one does.
//
// Only all_reduces are combined. reduce_scatter and all_gather are layout changes whose
// operand and result blocks the overlap schedules (transforms/schedules) pattern-match
// against the matmul beside them; concatenated, they would no longer match, and a
// combined reduce_scatter would need each member's blocks interleaved in the buffer.
#ifndef COMMIR_TRANSFORMS_COLLECTIVES_COMBINE_ALL_REDUCES_H_
#define COMMIR_TRANSFORMS_COLLECTIVES_COMBINE_ALL_REDUCES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::collectives {

// PyTorch DDP's default bucket_cap_mb (torch.nn.parallel.DistributedDataParallel).
inline constexpr int64_t kDefaultThresholdBytes = int64_t{25} << 20;
// The largest threshold accepted: byte counts up to 2^50 add exactly in the doubles
// AssignBuckets sums, and a bucket's element count stays far inside int64.
inline constexpr int64_t kMaxThresholdBytes = int64_t{1} << 50;

struct CombineCounts {
  int64_t buckets = 0;   // combined all_reduces made
  int64_t combined = 0;  // all_reduces they replaced
};

// Combines the all_reduces of `function` (a spmd function) in every block.
absl::StatusOr<CombineCounts> CombineAllReduces(Function& function, int64_t threshold_bytes);

// The same for every spmd function of `module`.
absl::StatusOr<CombineCounts> CombineAllReduces(Module& module, int64_t threshold_bytes);

struct CombineAllReducesOptions {
  int64_t threshold_bytes = kDefaultThresholdBytes;

  static const OptionSchema<CombineAllReducesOptions>& Schema();
};

COMMIR_DECLARE_PASS_WITH_OPTIONS(CombineAllReducesPass, CombineAllReducesOptions);

}  // namespace commir::collectives

#endif  // COMMIR_TRANSFORMS_COLLECTIVES_COMBINE_ALL_REDUCES_H_
