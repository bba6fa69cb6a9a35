// How the partitioner shards gather and scatter_add (their entries in the sharding table,
// op_sharding.h). Vocabulary parallelism, as Megatron-LM's VocabParallelEmbedding does it,
// follows from gather's rule: the gathered axis of the table is a kSum factor, so a table
// split along it leaves each device a partial result, and DecomposeGather makes each
// device look up only the ids its shard holds (zero rows elsewhere); the partitioner then
// sums the partial rows like any partial value (an all_reduce, or a reduce_scatter where
// the consumer wants the result split, as a sequence-parallel stream does).
#ifndef COMMIR_TRANSFORMS_SHARDING_GATHER_SHARDING_H_
#define COMMIR_TRANSFORMS_SHARDING_GATHER_SHARDING_H_

#include "commir/ir.h"
#include "transforms/sharding/decompositions.h"
#include "transforms/sharding/op_rules.h"

namespace commir::sharding {

// gather(table, indices){axis}: the table's other dimensions and every dimension of the
// indices pass through to the result; the gathered axis is summed (kSum). Linear in the
// table, so a partial table gives a partial result.
OpRule GatherRule(const Operation& op);
// scatter_add(base, indices, updates){axis}: the base's other dimensions pass through
// (shared with the updates' and the result's); the base's axis and the indices'
// dimensions stay whole, since every device's rows would otherwise need the updates of
// every other device.
OpRule ScatterAddRule(const Operation& op);

// gather with its table split along the gathered axis: each device's gather takes the
// offset of its first row, `rank(axes) * local rows` (the mask), and its result is
// partial over those axes. Unsplit: the op itself.
DecompositionResult DecomposeGather(const DecompositionInput& input);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_GATHER_SHARDING_H_
