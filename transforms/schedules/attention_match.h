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

using Operand = sharding::Emitter::Operand;

// The position of the first query of the whole (unsplit) query sequence, when the local
// `q_pos` of a sequence-split attention has the form lower-to-spmd gives it:
// base + rank(axes) * local_queries, with base a number or a `full` index constant.
// Ulysses and zigzag attention place queries by it; nullopt when q_pos has another form.
std::optional<Operand> QueryBase(const Value* q_pos, const AxisList& axes, int64_t local_queries);

// Builds a schedule op by op at one insertion point. The first failure is kept and
// later calls do nothing and return null, so a rewrite reads as straight-line code and
// checks status() once at the end (failures are bugs: every op is built from a
// verified match).
class ScheduleEmitter {
 public:
  ScheduleEmitter(Function* function, Block* block, Operation* before, Location loc)
      : function_(function), block_(block), before_(before), loc_(loc) {}

  // Moves the insertion point to the end of `block` (a loop body) or before `before`.
  void SetInsertionPoint(Block* block, Operation* before) {
    block_ = block;
    before_ = before;
  }
  Block* block() const { return block_; }
  Operation* before() const { return before_; }
  Function* function() const { return function_; }
  Location loc() const { return loc_; }

  // A one-result op named `name` (empty: unnamed); `type` where the op needs one.
  Value* Op(OpKind kind, std::vector<Operand> operands, AttrDict attrs = {},
            std::optional<Type> type = std::nullopt, std::string name = "");
  // An op with `num_results` results, named by `names`.
  std::vector<Value*> Ops(OpKind kind, std::vector<Operand> operands, AttrDict attrs,
                          int num_results, const std::vector<std::string>& names);
  // `full() {value = v} : index`.
  Value* IndexConstant(int64_t value, std::string name = "");
  // `x` converted to `type` (x itself when it has that element type already).
  Value* Convert(Value* x, ElementType type);

  // Records a failure from elsewhere (a loop body's emitter); the first one is kept.
  void Fail(absl::Status status) {
    if (status_.ok()) status_ = std::move(status);
  }
  const absl::Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }

 private:
  Function* function_;
  Block* block_;
  Operation* before_;
  Location loc_;
  absl::Status status_;
};

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
