// The sharding table: the one place that says, per op of global functions, how the
// partitioner shards it. An entry names
//   - the op's factor rule (op_rules.h), and
//   - its decomposition: the per-device ops lower-to-spmd emits where the chosen
//     strategy needs more than the op itself (decompositions.h), together with the
//     all_reduces that decomposition emits per split kStats factor. ChooseStrategy
//     charges exactly those (RuleFor copies the count into OpRule::stats_all_reduces),
//     so what is costed and what is lowered come from one declaration; a test lowers
//     every such op and counts.
// Ops with the kElementwise trait need no entry: their rule is ElementwiseRule and
// their per-device form is the op itself. Every other op that may appear in a global
// function (neither kSpmdOnly nor a terminator) must have one; the table is checked at
// its first use.
#ifndef COMMIR_TRANSFORMS_SHARDING_OP_SHARDING_H_
#define COMMIR_TRANSFORMS_SHARDING_OP_SHARDING_H_

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "commir/ir.h"
#include "transforms/sharding/decompositions.h"
#include "transforms/sharding/op_rules.h"

namespace commir::sharding {

struct OpSharding {
  OpRule (*rule)(const Operation& op) = nullptr;
  // Null: the op itself runs on each device's block.
  Decomposition decompose = nullptr;
  // The all_reduces `decompose` emits for each split kStats factor.
  int stats_all_reduces = 0;
};

using ShardingTable = absl::flat_hash_map<OpKind, OpSharding>;

// The entries written out (elementwise ops are not among them).
const ShardingTable& ExplicitShardingTable();

// How `kind` is sharded: its entry, or the elementwise one for kElementwise ops; null
// for ops that never appear in global functions (spmd-only ops, terminators).
const OpSharding* ShardingOf(OpKind kind);

// OK when every op of global functions has a way to be sharded in `table` (an entry, or
// the kElementwise trait); otherwise an error naming the ops that lack one.
absl::Status CheckShardingTable(const ShardingTable& table);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_OP_SHARDING_H_
