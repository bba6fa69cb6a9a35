// propagate-sharding: completes the layout of every value of a global function from the
// layouts on its arguments, its results and the annotations users wrote, GSPMD-style.
//
// Which layouts are given (docs/format-decisions.md, "Partitioning"):
//  - function arguments: always (an unsharded argument is replicated);
//  - an op result whose type carries a sharding (`@axis` or `partial`) when propagation
//    starts: a constraint, never changed; except the result of an elementwise op whose
//    layout is exactly what the parser infers from its operands (InferBinary and
//    InferUnary in commir/ops/elementwise_ops.cc; `convert` counts as a linear unary
//    op): the parser wrote that layout, not the user, so it is free;
//  - `reshard` results: always (an unsharded `reshard` requires replication);
//  - the declared result types: requests, which lower-to-spmd honours with a reshard at
//    the return, and which propagation treats as strong preferences.
// Every other tensor value is free, and gets the layout chosen here.
//
// The algorithm (linear in the number of ops; each op does a constant amount of work):
//  1. Backward, in reverse program order: each value collects a preferred layout from
//     its users. A user op asks ChooseStrategy (op_rules.h) for its cheapest strategy
//     given the layouts known so far for its operands and its results' constraints or
//     preferences, and votes for the layout that strategy needs from each free operand.
//     A vote derived from a constraint or the return outranks one derived from a
//     preference, which outranks one derived from operands only; among equal votes the
//     earliest user in program order wins.
//  2. Forward, in program order: each op picks the strategy ChooseStrategy finds
//     cheapest given its operands' (now all known) layouts and each result's
//     constraint, or else its preference. A free result takes the layout the op
//     produces (possibly `partial`); a result pending a max is reduced right away,
//     scattered onto the dimensions its preference splits where possible.
//  Steps 1 and 2 repeat `iterations` times; later backward passes know every layout the
//  previous forward pass chose.
//  3. A value resharded for one user is available in that layout to its later users
//     for free (lower-to-spmd emits each reshard once), and a reshard's cost is divided
//     among the later users of the same kind and operand position (SharingUsers,
//     op_rules.h): one all_gather of a normed activation serves the q, k and v
//     projections. When the plan reshards a function argument (gathers a weight), a
//     second plan that keeps the arguments where they are (Megatron's, when the weights
//     are laid out for it) is made too, and the one whose reshards cost less in total
//     wins (the first on a tie): op-by-op choices cannot see that gathering one weight
//     to save one reduce_scatter forces the key/value projections to gather everything.
//  4. Then one more backward and forward round is tried from the chosen plan (unless
//     `iterations` asked for more rounds) and kept only if its reshards cost less. The
//     first backward pass knows only the given layouts, so a gather a late user needs
//     is voted all the way up to where a value is made; in a gradient function that
//     pulled the layernorm backward onto whole rows and all_reduced the partial input
//     gradient of the MLP's up projection, where Megatron-SP reduce_scatters it onto the
//     sequence split (the second backward pass sees the split the statistics have).
// Strategies and plans are compared by time, written as bytes a link moves meanwhile:
// their communication (bytes per device, at the network's rate when a collective's
// group spans nodes, plus a latency per collective; layout.h, compute_cost.h) plus the
// per-device compute they leave (compute_cost.h: the op's roofline time on the default
// device, divided among the blocks the strategy splits it into), then per-device work,
// then candidate order (op_rules.h), so results are deterministic. Without the compute
// term replicating a whole batch's work was free, and a training step on a dp x tp mesh
// gathered its weights and batch rather than all_reduce its gradients. A plan's cost
// charges the all_reduces that combine-all-reduces combines (those depending on none of
// each other's results, by collective round: collectives/all_reduce_candidates.h) one
// latency per bucket of kDefaultBucketBytes (collective_buckets.h), as DDP's gradient
// buckets do; each op's own choice still sees a whole latency per collective. That is
// what the default spmd pipeline runs: it ends with combine-all-reduces (lower.h,
// kDefaultSpmdPipeline). PropagationReport counts the priced all_reduces and buckets.
// Besides the plans of step 3, each plan is also made with the backward passes casting
// no vote that keeps a summed dimension whole (a layernorm weight's gradient summing a
// dp-split batch would otherwise pull the backward onto whole batches), and the cheapest
// of the plans is kept. One round is the default (`iterations`), plus the refining round
// of step 4 when it pays: on 2000 random forward programs a second round lowered the
// communication of one; on gradient functions it finds Megatron-SP's backward
// (transforms/sharding/gradient_partition_test.cc).
#ifndef COMMIR_TRANSFORMS_SHARDING_PROPAGATE_H_
#define COMMIR_TRANSFORMS_SHARDING_PROPAGATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::sharding {

// What a propagation did, for the pass's statistics, remarks and explain= option.
struct PropagationReport {
  // Free tensor values (whose layout propagation chooses), and those of them whose
  // layout changed (one that stays as the parser inferred it does not count).
  int64_t free_values = 0;
  int64_t layouts_changed = 0;
  // The kept plan's reshard all_reduces and the buckets its cost charges them in (one
  // latency each; AssignBuckets at kDefaultBucketBytes), summed over the functions: what
  // combine-all-reduces leaves of those all_reduces. A split norm's statistics
  // all_reduces are charged in the norm's own cost and are not counted here.
  int64_t priced_all_reduces = 0;
  int64_t priced_all_reduce_buckets = 0;
  // Per explained op: its location and ExplainStrategyChoice's text of its final choice
  // (the last forward round's), in program order.
  struct Explanation {
    Location loc;
    std::string text;
  };
  std::vector<Explanation> explanations;
  // The names of `explain` that were found (a value of a global function with a mesh).
  absl::flat_hash_set<std::string> explained_names;
};

struct PropagationOptions {
  int iterations = 1;
  // Value names (without '%') whose defining op's strategy choice is explained.
  std::vector<std::string> explain;
  // Filled in when given.
  PropagationReport* report = nullptr;
};

// Whether result `r` of `op` (in a global function) is a layout constraint (see above).
bool IsLayoutConstraint(const Operation& op, int r);

// Propagates over `function` if it is a global function with a mesh (others are left
// alone). Errors (ops without a rule; only an unverified function has them) are
// reported to `diagnostics` when given.
absl::Status PropagateSharding(Function& function, const PropagationOptions& options = {},
                               DiagnosticEngine* diagnostics = nullptr);
absl::Status PropagateSharding(Module& module, const PropagationOptions& options = {},
                               DiagnosticEngine* diagnostics = nullptr);

// propagate-sharding's options.
struct PropagateShardingPassOptions {
  int64_t iterations = 1;  // PropagationOptions::iterations
  // Values ("%q,%k" or "q k") whose op's strategy choice is explained as remarks.
  std::string explain = "";

  static const OptionSchema<PropagateShardingPassOptions>& Schema();
};

COMMIR_DECLARE_PASS_WITH_OPTIONS(PropagateShardingPass, PropagateShardingPassOptions);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_PROPAGATE_H_
