// Per-op sharding rules of the partitioner, in the factor style of Shardy (the
// successor of GSPMD's per-op propagation).
//
// An op's rule names its *factors*: the independent index spaces of its computation
// (for matmul: each batch dimension, M, N and the contracted K). Every dimension of
// every operand and result is a list of factors, major first (one factor for most
// dimensions; several where a reshape splits or merges dimensions, or where grouped
// attention nests query heads under key/value heads; none where a dimension is
// broadcast). A *strategy* gives each factor the mesh axes it is split over; from it
// follow the layout each operand must have and the layout the per-device op produces
// (its natural result layout). Factor kinds:
//   kPass       split freely: every device computes its block (elementwise dims,
//               batch/M/N of matmul, attention batch, heads and query sequence, ...);
//   kSum        contracted or summed: split, each device holds an addend, so the result
//               is `partial` over the factor's axes (matmul K, reduce_sum/mean dims);
//   kMax        like kSum for reduce_max: the result is pending a cross-device max;
//   kStats      a normalized dimension (softmax, layernorm, rmsnorm): split, the
//               per-row statistics are combined with all_reduces;
//   kReplicate  must not be split (sliced or concatenated dims, attention's key/value
//               sequence and head dim, reshape dims that do not factor).
// A dimension of several factors may be split on a factor only if every more-major
// factor of that dimension is split down to size 1 (so that each device's block of the
// dimension is contiguous).
//
// `partial` operands pass through ops that are linear in them (PartialMode): the sum of
// the per-device results is then the result.
//
// ChooseStrategy enumerates a few candidate strategies, GSPMD-style: one from each
// operand whose layout is known (that operand first, then the others and the result
// targets merged in where compatible), one from each layout an operand is already
// available in (StrategyQuery::available, merged the same way), one from the result
// targets (then the operands), and full replication; plus, for each candidate that splits a kStats factor, the same
// with that factor gathered instead. Each is made legal (Legalize) and costed, in the
// cost model of ReshardCost (layout.h: bytes per device plus a latency per collective):
//   comm  = the cost of resharding each known operand to what the strategy needs, from
//           the cheapest of its layout and the layouts it is already available in (a
//           value gathered once is shared by its users: reusing the gather is free),
//           divided among the users expected to share that reshard
//         + the statistics all_reduces of kStats factors
//         + the cost of resharding each natural result to its target, if it has one (a
//           result pending a max with no target costs its all_reduce);
//   compute = the op's time under the strategy in the same unit (compute_cost.h: its
//           roofline time on the default device divided among the strategy's blocks);
//   work  = per-device elements of the operands and results (less is more parallel).
// The cheapest by (pinned operands resharded, comm + compute, work) wins; ties go to the earliest candidate in the order
// above. Every step is a constant amount of work per op (ranks are small), so callers
// stay linear in the program size.
#ifndef COMMIR_TRANSFORMS_SHARDING_OP_RULES_H_
#define COMMIR_TRANSFORMS_SHARDING_OP_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "transforms/sharding/layout.h"

namespace commir::sharding {

enum class FactorKind { kPass, kSum, kMax, kStats, kReplicate };

// Which operands' `partial` layouts the op passes through (it is linear in them).
enum class PartialMode {
  kNone,   // no operand may be partial
  kFirst,  // operand 0 (neg, exact widening converts, div's numerator, layout ops,
           // reduce_sum/mean)
  kAll,    // all tensor operands partial over the same axes (add, sub, concat)
  kAny,    // exactly one tensor operand (mul, matmul)
};

struct TensorFactors {
  // False for index operands and number literals: they take no layout.
  bool is_tensor = true;
  // Per dimension, its factors, major first.
  std::vector<std::vector<int>> dims;
};

struct OpRule {
  std::vector<int64_t> sizes;
  std::vector<FactorKind> kinds;
  std::vector<TensorFactors> operands;
  std::vector<TensorFactors> results;
  PartialMode partial_mode = PartialMode::kNone;
  // all_reduces that combine the statistics of a split kStats factor: what the op's
  // decomposition declares in the sharding table (so what is costed is what is lowered).
  int stats_all_reduces = 0;
  // The operand every device adds into its result whole (scatter_add's base), or -1. When
  // a kSum factor it lacks is split (scatter_add's updates, split over their rows), each
  // device adds only its share of the sum, and the operand must be counted once: it is
  // required partial over those axes, kept by coordinate 0 (a local step, no collective).
  int added_once_operand = -1;

  int num_factors() const { return static_cast<int>(sizes.size()); }
  int AddFactor(int64_t size, FactorKind kind);
};

// The rule of a global-function op from its operand and result types and attributes,
// built as the op's entry in the sharding table (op_sharding.h) says, with that entry's
// stats_all_reduces. Fails for ops that have no rule (spmd-only ops, terminators).
// Defined in op_sharding.cc.
absl::StatusOr<OpRule> RuleFor(const Operation& op);

struct Strategy {
  std::vector<AxisList> factors;
  // Partial axes passed through from operands (mesh order).
  AxisList partial;
  // With kFirst/kAny: the operand that carries `partial`.
  int partial_operand = -1;

  friend bool operator==(const Strategy& a, const Strategy& b) {
    return a.factors == b.factors && a.partial == b.partial &&
           a.partial_operand == b.partial_operand;
  }
};

// Makes `strategy` legal for `rule` on `mesh`: kReplicate factors unsplit, each axis
// used once (the partial first, then factors in order), each factor divisible by its
// group (minor axes dropped), multi-factor dimensions contiguous, partial only where
// the op passes it through.
void Legalize(const OpRule& rule, const Mesh& mesh, Strategy& strategy);

// The layout operand `i` must have under `strategy` (replicated and empty for
// non-tensor operands).
Layout RequiredOperandLayout(const OpRule& rule, const Strategy& strategy, int i,
                             const Mesh& mesh);
// The layout the per-device op produces for result `i`.
Layout NaturalResultLayout(const OpRule& rule, const Strategy& strategy, int i, const Mesh& mesh);

// Merges `layout` of tensor `t` into `strategy`: factors not yet assigned take the axes
// the layout gives them, where those axes are unused. A layout that does not factor
// contributes what it can.
void MergeLayout(const OpRule& rule, const TensorFactors& t, const Layout& layout, const Mesh& mesh,
                 Strategy& strategy);

struct StrategyQuery {
  const Operation* op = nullptr;
  const OpRule* rule = nullptr;
  const Mesh* mesh = nullptr;
  // Per operand: its current layout, or nullopt when unknown (or not a tensor).
  std::vector<std::optional<Layout>> operands;
  // Per operand: its global type, when the op's operand values no longer carry it (the
  // arguments of a function being lowered in place); empty: the values' types.
  std::vector<Type> operand_types;
  // Per result: the layout wanted, or nullopt when there is no preference.
  std::vector<std::optional<Layout>> targets;
  // Per operand: other layouts the value already exists in, because an earlier user
  // resharded it (the all_gather of a normed activation made for q feeds k and v too).
  // Each is a free source of a reshard; empty (or shorter than `operands`): none.
  std::vector<std::vector<Layout>> available;
  // Per operand: how many users of the value, this op included, are expected to want
  // the same reshard of it (SharingUsers); the reshard's cost is divided among them, as
  // the later ones reuse it. Empty (or shorter than `operands`): 1.
  std::vector<int> sharing;
  // Per operand: whether its layout should stay as it is (a weight laid out the way the
  // user wants it kept). Strategies that reshard fewer pinned operands win before cost
  // is compared. Empty (or shorter than `operands`): none pinned.
  std::vector<bool> pinned;
};

// Where a candidate strategy came from (see the header comment for the order).
enum class CandidateOrigin {
  kOperand,        // operand `origin_index`'s layout first, then the others and targets
  kAvailable,      // a layout operand `origin_index` already exists in (an earlier reshard)
  kTargets,        // the result targets first, then the operands
  kReplicated,     // full replication
  kStatsGathered,  // candidate `origin_index` with its split statistics gathered
};

// For each op of `ops` (one block, in program order) and each of its operands: 1 + the
// number of later ops in `ops` of the same kind and attributes that read the same value
// at the same operand position (the k and v projections after the q projection of one
// normed activation; the up projection after the gate one; not the backward's
// transposed matmul after the forward's). Such users need the value in the
// same layout whenever their other operands are laid out alike, so a reshard the first
// one makes serves them all. Linear in the number of operands.
std::vector<std::vector<int>> SharingUsers(absl::Span<Operation* const> ops);

struct Choice {
  Strategy strategy;
  CandidateOrigin origin = CandidateOrigin::kReplicated;
  int origin_index = -1;
  double comm_cost = 0;
  // The op's per-device time under the strategy, in the unit of comm_cost
  // (compute_cost.h): splitting the work is worth what it saves.
  double compute_cost = 0;
  double work = 0;
  std::vector<Layout> operands;  // required operand layouts
  std::vector<Layout> results;   // natural result layouts
  // Per operand: where its required layout is resharded from: -1 for the operand's
  // layout, k for query.available[i][k] (the cheapest source; -1 on ties).
  std::vector<int> sources;
  // How many pinned operands the strategy reshards.
  int pinned_moves = 0;
  // What sharing took off comm_cost: comm_cost + shared_discount is what this op's
  // reshards really cost when none is reused later.
  double shared_discount = 0;
};

// Every candidate strategy of `query`, legalized, deduplicated and costed, in candidate
// order, and which one is chosen: the first that no later one is cheaper than.
struct WeighedStrategies {
  std::vector<Choice> candidates;
  size_t chosen = 0;
};
WeighedStrategies WeighStrategies(const StrategyQuery& query);

// Whether `a` costs less than `b`: fewer pinned operands resharded, then less
// communication plus compute (relative tolerance 1e-9), then less work. ChooseStrategy's
// order.
bool CheaperChoice(const Choice& a, const Choice& b);

// The cheapest legal strategy: WeighStrategies' chosen candidate (see the header comment
// for the candidates and costs).
Choice ChooseStrategy(const StrategyQuery& query);

// The cost (bytes per device plus latency, see ReshardCost) of the statistics
// all_reduces a strategy needs.
// `x` is the global type of the op's first operand.
double StatsBytes(Type x, const OpRule& rule, const Strategy& strategy, const Mesh& mesh);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_OP_RULES_H_
