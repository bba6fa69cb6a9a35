// lower-to-spmd: the SPMD partitioner. Turns a global function into the spmd function of
// the same name and signature that each device runs, with explicit collectives.
//
// The layouts written in the global function are the decisions (run propagate-sharding
// first to complete them; a value without a sharding is replicated). Ops are visited in
// program order, like XLA's SpmdPartitioner visitor. For each op:
//  1. ChooseStrategy (op_rules.h) picks how the op runs per device, given its operands'
//     layouts and its results' layouts as targets;
//  2. each operand is resharded to the layout the strategy needs (layout.h: nothing when
//     they match, a local dynamic_slice to split further, all_gather, all_to_all,
//     reduce_scatter or all_reduce for partial values); a reshard an earlier user of the
//     value already made is reused, and ChooseStrategy costs it as free;
//  3. the per-device op is emitted on local types. Where the op's local form differs
//     (the op's decomposition in the sharding table, op_sharding.h):
//     - matmul with a split contracting dim, reduce_sum over a split dim: the local op,
//       whose result is `partial`;
//     - reduce_mean over split dims: the local mean times 1/(number of blocks), partial;
//     - reduce_max over split dims: the local max, then a max all_reduce (or a max
//       reduce_scatter onto a dimension the result is split on);
//     - softmax, layernorm, rmsnorm over a split normalized dim: per-row statistics
//       (max and sum; mean and variance; mean square) combined with all_reduces over
//       the dim's axes, computed in f32 (f64 for f64) like the kernels;
//     - causal attention with the query sequence split over axes A: each device's
//       queries at their true positions, q_pos = (given q_pos, or Skv - Sq) +
//       rank(A) * Sq_local; the key/value sequence is gathered;
//     - grouped-query attention on a 1-D mesh wider than the key/value heads: the query
//       heads stay split and each device slices the key/value head they use from the
//       whole key/value heads it holds (kv_head = rank / (devices per key/value head));
//     - reshape of split dimensions: the local reshape (the rules only allow splits that
//       keep each device's block contiguous);
//     - reshard: nothing beyond step 2;
//  4. the op's per-device result is resharded to the result's layout.
// Finally each returned value is resharded to the declared result layout, and an
// all_to_all whose only user sums over its concatenated dimension becomes a local sum and
// a reduce_scatter (sum_scatter.h: ZeRO's weight-gradient reduce_scatter). The function
// is rewritten in place (same Function object, name, signature and position in the
// module), so callers holding it keep a valid pointer.
//
// New values are named after the value they come from and the step that made them
// (`%x_ag`, `%h_rs`); a result keeps its name. Run canonicalize, cse and dce afterwards
// (kPartitionPipeline, which kDefaultSpmdPipeline extends): CSE merges identical
// collectives of one value, such as the all_gather that several matmuls need from one
// activation.
#ifndef COMMIR_TRANSFORMS_SHARDING_LOWER_H_
#define COMMIR_TRANSFORMS_SHARDING_LOWER_H_

#include "absl/status/status.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir::sharding {

// Partitioning alone: one collective per reshard, each where lower-to-spmd emits it.
// For callers that read individual collectives of the partitioned program (the plan
// search's layer cost, which models data-parallel gradient buckets itself).
inline constexpr char kPartitionPipeline[] =
    "propagate-sharding,lower-to-spmd,canonicalize,cse,dce";

// What commir-opt users, commir-run (before a multi-device run), the operator search and
// Python's DEFAULT_SPMD_PIPELINE run: partitioning, then the independent all_reduces
// combined into DDP-sized buckets (collectives/combine_all_reduces.h), which is what
// propagate-sharding's plan cost charges them as. Forward tensor-parallel all_reduces
// (each feeding the next) and every all_gather and reduce_scatter stay as partitioning
// made them, so the overlap schedules run after it find what they rewrite.
inline constexpr char kDefaultSpmdPipeline[] =
    "propagate-sharding,lower-to-spmd,canonicalize,cse,dce,combine-all-reduces";

// Lowers `function` if it is a global function with a mesh (others are left alone).
absl::Status LowerToSpmd(Function& function, DiagnosticEngine* diagnostics = nullptr);
absl::Status LowerToSpmd(Module& module, DiagnosticEngine* diagnostics = nullptr);

COMMIR_DECLARE_PASS(LowerToSpmdPass);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_LOWER_H_
