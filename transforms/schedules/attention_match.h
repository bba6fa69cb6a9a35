// What ring-attention and ulysses-attention rewrite: an attention op of a spmd function
// whose keys and values are all_gathers along the sequence (dim 2) over one axis group,
// the form lower-to-spmd gives sequence-parallel attention.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_MATCH_H_
#define COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_MATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "commir/type.h"
#include "transforms/sharding/layout.h"

namespace commir::schedules {

struct GatheredAttention {
  Operation* attention = nullptr;
  // The all_gathers that make attention's k and v; their operands are the local blocks.
  Operation* k_gather = nullptr;
  Operation* v_gather = nullptr;
  AxisList axes;
  int64_t group_size = 1;
};

// The matching attention ops at the top level of `function`'s body (not inside loops),
// in program order. Only groups of two or more devices match.
std::vector<GatheredAttention> FindGatheredAttention(const Function& function);

// Erases `ops` (their results must be unused, or used only by each other), then every
// op that made one of their operands and is left unused, transitively: the all_gathers
// and position arithmetic rewritten attentions no longer need. Loops and ops with
// regions are kept. A pass calls it once, after all its rewrites: one batch visits only
// the ops that die and filters each shared user list (%k's, %v's) once, where erasing
// after each rewrite filtered them once per attention (quadratic).
void EraseWithDeadProducers(absl::Span<Operation* const> ops);

using Operand = OpBuilder::Operand;

// The position of the first query of the whole (unsplit) query sequence, when the local
// `q_pos` of a sequence-split attention has the form lower-to-spmd gives it:
// base + rank(axes) * local_queries, with base a number or a `full` index constant.
// Ulysses and zigzag attention place queries by it; nullopt when q_pos has another form.
std::optional<Operand> QueryBase(const Value* q_pos, const AxisList& axes, int64_t local_queries);

// Index literal operand.
inline Operand IndexLiteral(int64_t value) {
  return Operand::Literal(static_cast<double>(value), Type::Index());
}

// Attribute dictionaries used by both schedules.
AttrDict CollectiveAttrs(const AxisList& axes, int64_t stream);
AttrDict SliceAttrs(const std::vector<int64_t>& start, const std::vector<int64_t>& size);
AttrDict DimAttrs(int64_t dim);

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_MATCH_H_
