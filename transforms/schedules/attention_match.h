// What ring-attention and ulysses-attention rewrite: an attention op of a spmd function
// whose keys and values are all_gathers along the sequence (dim 2) over one axis group,
// the form lower-to-spmd gives sequence-parallel attention; or an attention_grad op
// with such gathered keys and values whose dk and dv each feed exactly one
// reduce_scatter along the sequence over the same axes (the form lower-to-spmd gives the
// backward: every device's queries contribute to every key's gradient).
//
// axes= (2-D attention): a schedule may act on some of the gather's axes only and leave
// the rest gathered. Which ones it may take follows from block order: in a gather over
// (a, b) block c_a * size(b) + c_b comes from device (c_a, c_b), so the blocks of the
// devices that share c_a are contiguous and those that share c_b are strided. A ring
// over the leading (major) axes keeps an all_gather over the trailing ones in each step,
// which gathers one contiguous super-block; Ulysses over the trailing (minor) axes
// receives one contiguous chunk and leaves an all_gather over the leading ones. The
// other ends would hold strided keys, which one attention call with one k_pos cannot
// place, so they are skipped with a reason.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_MATCH_H_
#define COMMIR_TRANSFORMS_SCHEDULES_ATTENTION_MATCH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "commir/type.h"
#include "transforms/sharding/layout.h"

namespace commir::schedules {

struct GatheredAttention {
  // An attention or an attention_grad op (is_grad()).
  Operation* attention = nullptr;
  // The all_gathers that make attention's k and v; their operands are the local blocks.
  Operation* k_gather = nullptr;
  Operation* v_gather = nullptr;
  // The gather's axes the schedule acts on, in the gather's order, and their group size.
  AxisList axes;
  int64_t group_size = 1;
  // The gather's other axes (left gathered by the schedule), in the gather's order, and
  // their group size (1 when the schedule takes every axis).
  AxisList rest;
  int64_t rest_size = 1;
  // attention_grad only: the reduce_scatters of dk and dv (over the gather's axes, along
  // the sequence) that a schedule replaces.
  Operation* dk_scatter = nullptr;
  Operation* dv_scatter = nullptr;

  bool is_grad() const { return attention->Is(OpKind::kAttentionGrad); }
};

// Which end of a gather's axis list a schedule may take (see above).
enum class GatherEnd { kLeading, kTrailing };

// The matching attention and attention_grad ops of `function`, in program order, nested loop bodies
// included (the steps a ring over other axes left). `chosen` empty: every gather axis.
// Otherwise the schedule takes exactly the chosen axes of each gather, which must be
// the `end` of its axis list; an attention whose gather does not allow that is skipped
// and, when `skipped` is given, the reason appended to it ("@f: attention at 3:5: ...").
// Only groups of two or more devices match.
std::vector<GatheredAttention> FindGatheredAttention(const Function& function,
                                                     const AxisList& chosen = {},
                                                     GatherEnd end = GatherEnd::kLeading,
                                                     std::vector<std::string>* skipped = nullptr);

// Parses the axes= option of the attention schedules: "" (every axis), "sp" or
// "dp,sp". Every name must be an axis of some mesh of `module` (an axis only another
// function's mesh has just leaves that function's attention alone); otherwise a
// FailedPrecondition naming `pass` and the axis.
absl::StatusOr<AxisList> ParseScheduleAxes(const Module& module, const std::string& text,
                                           const std::string& pass);

// The function's `rank(axes)` before `attention` if there is one, else a new one, at the
// top level of the function's body (an attention in a loop body, a step of a ring over
// other axes, shares it with every step). Failures go to `e`, whose function it uses.
Value* FindOrMakeTopLevelRank(OpBuilder& e, Operation* attention, const AxisList& axes);

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
