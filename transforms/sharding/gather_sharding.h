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
// scatter_add(base, indices, updates){axis}: the base's dimensions pass through to the
// result, its other dimensions shared with the updates'; the indices' dimensions stay
// whole (every device needs every update of its rows). A base split along the axis (the
// gradient of a vocabulary-parallel table) keeps its split: each device adds the updates
// of its own rows.
OpRule ScatterAddRule(const Operation& op);

// gather with its table split along the gathered axis: each device's gather takes the
// offset of its first row, `rank(axes) * local rows` (the mask), and its result is
// partial over those axes. Unsplit: the op itself.
DecompositionResult DecomposeGather(const DecompositionInput& input);
// scatter_add with its base split along the axis: each device's scatter_add takes the
// offset of its first row and skips the other devices' rows.
DecompositionResult DecomposeScatterAdd(const DecompositionInput& input);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_GATHER_SHARDING_H_
