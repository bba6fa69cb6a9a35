// attention_merge: the online-softmax merge of partial attention results (the ring
// schedules' per-step correction, one kernel instead of a chain of elementwise ops).
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/ops/op_helpers.h"

namespace commir::ops {
namespace {

// attention_merge(o_acc, lse_acc, o_1, lse_1[, o_2, lse_2 ...]) -> (o, lse).
// o_acc [.., S, D] and lse_acc [.., S] are the accumulator, f32 or f64: the merge
// computes in that type and returns it. Each partial (o_i, lse_i) has the same shapes
// in any float type (a bf16 attention output with its f32 lse): it is widened in the
// kernel, so no separate convert runs.
absl::StatusOr<std::vector<Type>> InferAttentionMerge(const OpSignature& sig) {
  if (sig.operand_types.size() % 2 != 0) {
    return OpError("attention_merge takes (o, lse) pairs: the accumulator and each partial; "
                   "got %d operands", sig.operand_types.size());
  }
  absl::StatusOr<Type> o = TensorOperand(sig, 0, "o_acc");
  if (!o.ok()) return o.status();
  absl::StatusOr<Type> lse = TensorOperand(sig, 1, "lse_acc");
  if (!lse.ok()) return lse.status();
  if (o->element_type() != ElementType::kF32 && o->element_type() != ElementType::kF64) {
    return OpError("o_acc must be f32 or f64 (the merge computes in the accumulator's type), "
                   "got %s", o->ToString());
  }
  if (o->rank() < 2) return OpError("o_acc must have rank >= 2 [.., S, D], got %s", o->ToString());
  if (absl::Status s = RequireSameElementType(*o, *lse, "o_acc and lse_acc"); !s.ok()) return s;
  std::vector<int64_t> rows(o->dims().begin(), o->dims().end() - 1);
  if (lse->dims() != rows) {
    return OpError("lse_acc must be [%s] (o_acc's shape without its last dimension), got %s",
                   absl::StrJoin(rows, ", "), lse->ToString());
  }
  for (size_t i = 2; i < sig.operand_types.size(); i += 2) {
    const int pair = static_cast<int>(i / 2);
    const std::string o_role = absl::StrFormat("o_%d", pair);
    const std::string lse_role = absl::StrFormat("lse_%d", pair);
    absl::StatusOr<Type> o_i = TensorOperand(sig, static_cast<int>(i), o_role);
    if (!o_i.ok()) return o_i.status();
    absl::StatusOr<Type> lse_i = TensorOperand(sig, static_cast<int>(i + 1), lse_role);
    if (!lse_i.ok()) return lse_i.status();
    if (absl::Status s = RequireFloat(*o_i, o_role); !s.ok()) return s;
    if (absl::Status s = RequireFloat(*lse_i, lse_role); !s.ok()) return s;
    if (o_i->dims() != o->dims()) {
      return OpError("%s must have o_acc's shape %s, got %s", o_role, FormatShape(o->dims()),
                     o_i->ToString());
    }
    if (lse_i->dims() != rows) {
      return OpError("%s must have lse_acc's shape %s, got %s", lse_role, FormatShape(rows),
                     lse_i->ToString());
    }
  }
  return std::vector<Type>{Type::Tensor(o->element_type(), o->dims()),
                           Type::Tensor(lse->element_type(), lse->dims())};
}

// One memory-bound pass: every operand read once, both results written once (the
// partials in their own, narrower, type). About 8 FLOPs per row per partial (max,
// two exps, log, two divisions, ...) and 3 per output element per partial.
OpCost AttentionMergeCost(const OpSignature& sig, absl::Span<const Type> results) {
  if (results.size() != 2) return {};
  const double partials = static_cast<double>(sig.operand_types.size() / 2 - 1);
  const double rows = static_cast<double>(results[1].num_elements());
  const double elements = static_cast<double>(results[0].num_elements());
  return {partials * (8 * rows + 3 * elements), StreamingBytes(sig, results), 0};
}

}  // namespace

void AppendAttentionMergeOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kAttentionMerge,
      .name = "attention_merge",
      .summary = "online-softmax merge of partial attention results (o, lse) into an f32/f64 "
                 "accumulator",
      .min_operands = 4,
      .max_operands = -1,
      .min_results = 2,
      .max_results = 2,
      .infer = InferAttentionMerge,
      .cost = AttentionMergeCost,
      // No derivative: the schedules that emit it run after autodiff, on the forward and
      // backward attention ops autodiff already produced; a program that writes it
      // before autodiff gets autodiff's error naming the op.
  });
}

}  // namespace commir::ops
