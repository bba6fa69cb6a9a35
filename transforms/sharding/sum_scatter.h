// An all_to_all whose only user sums over the dimension it concatenates is a
// reduce_scatter of the local sum:
//
//   %t = all_to_all(%x) {axis = A, split_dim = s, concat_dim = c}
//   %y = reduce_sum(%t) {dims = [.., c, ..]}
// becomes
//   %l = reduce_sum(%x) {dims = [.., c, ..]}
//   %y = reduce_scatter(%l) {axis = A, dim = s'}     (s' = s less the summed dims before it)
//
// Both leave device i with block i of dimension s, summed over c and over the devices.
// The reduce_scatter sends (n-1)/n of the local sum where the all_to_all sent (n-1)/n of
// x, so never more, and it is the collective the overlap schedules and the simulator
// know. Lowering makes this pair where a gradient function sums a batched weight
// gradient over a data-parallel batch and the weight is sharded over the same axis
// (ZeRO-3 / FSDP): the partitioner's costs tie between "all_to_all the batch in, then
// sum" and "sum, then reduce_scatter", and ZeRO's reduce_scatter is the one wanted.
#ifndef COMMIR_TRANSFORMS_SHARDING_SUM_SCATTER_H_
#define COMMIR_TRANSFORMS_SHARDING_SUM_SCATTER_H_

#include "absl/status/statusor.h"
#include "commir/ir.h"

namespace commir::sharding {

// Rewrites every such pair of the spmd function `function` (in every block); returns how
// many. The summed dims may include others besides c, but not s.
absl::StatusOr<int> FoldAllToAllIntoSums(Function& function);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_SUM_SCATTER_H_
