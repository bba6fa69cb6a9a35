// The per-device form of ops whose split factors need more than the op itself run on
// each device's block: the statistics of a split normalized dimension combined with
// all_reduces (softmax, layer_norm, rms_norm), reduce_mean's division by the global
// count, causal attention's query positions, slice's local size, reshard's nothing.
// Which op uses which decomposition, and the all_reduces each declares (what the cost
// model charges), is recorded once, in the sharding table (op_sharding.h).
#ifndef COMMIR_TRANSFORMS_SHARDING_DECOMPOSITIONS_H_
#define COMMIR_TRANSFORMS_SHARDING_DECOMPOSITIONS_H_

#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/op_rules.h"

namespace commir::sharding {

struct DecompositionInput {
  OpBuilder& emitter;
  // The op of the global function, with its global types (but see global_operand_types).
  const Operation& op;
  const OpRule& rule;
  // The chosen strategy with the operand layouts it needs and its natural result layouts.
  const Choice& choice;
  // The per-device operands, laid out as choice.operands.
  absl::Span<const OpBuilder::Operand> operands;
  // The global type of each operand (function arguments being lowered in place no
  // longer carry it).
  absl::Span<const Type> global_operand_types;
};

// Emits the per-device ops for `input.op` and returns its results laid out as
// input.choice.results, or std::nullopt when the chosen strategy needs no decomposition
// (the op itself then runs on each device's block).
using DecompositionResult = absl::StatusOr<std::optional<std::vector<Value*>>>;
using Decomposition = DecompositionResult (*)(const DecompositionInput& input);

// The op itself on the per-device operands, with `attrs`: what runs when no
// decomposition is needed. Result types are inferred, or taken from the natural result
// layouts where the op requires them written (and for matmul).
absl::StatusOr<std::vector<Value*>> EmitPerDeviceOp(const DecompositionInput& input,
                                                    AttrDict attrs);

// softmax over a split dim: max and sum combined across the dim's axes (2 all_reduces).
DecompositionResult DecomposeSoftmax(const DecompositionInput& input);
// layer_norm (mean and variance: 2 all_reduces) and rms_norm (mean square: 1) over a
// split last dim.
DecompositionResult DecomposeNorm(const DecompositionInput& input);
// reduce_mean over split dims: the local sum divided by the global count, partial.
DecompositionResult DecomposeMean(const DecompositionInput& input);
// Causal attention with a split query sequence: each device's queries at their true
// positions. Query heads split over a mesh wider than the key/value heads: each device
// slices the one key/value head its query heads use (Megatron's replicated kv heads).
DecompositionResult DecomposeAttention(const DecompositionInput& input);
// attention_grad, causal, with a split query sequence: as attention, each device's
// queries at their true positions (dk and dv come out partial over those axes).
DecompositionResult DecomposeAttentionGrad(const DecompositionInput& input);
// slice: the local slice of each device's block (its `size` is the local one).
DecompositionResult DecomposeSlice(const DecompositionInput& input);
// reshard: the operand, already laid out as the strategy needs; nothing is emitted.
DecompositionResult DecomposeReshard(const DecompositionInput& input);
// dropout of a split operand: the block's offset in each dimension (rank times the local
// size over the dimension's axes, 0 where it is whole) and the global shape, so that
// each element draws its mask from its global index (dropout_decomposition.cc).
DecompositionResult DecomposeDropout(const DecompositionInput& input);
// moe_dispatch and moe_collect with their token groups split (expert parallelism): each
// device routes its own groups, `groups` the local count (moe_rule.cc).
DecompositionResult DecomposeMoe(const DecompositionInput& input);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_DECOMPOSITIONS_H_
