// Block terminators: return (function bodies) and yield (loop bodies).
#include "commir/ops/op_helpers.h"

namespace commir::ops {
namespace {

// Operand types are checked against the signature or loop by the verifier.
absl::StatusOr<std::vector<Type>> InferNoResults(const OpSignature&) {
  return std::vector<Type>{};
}

OpCost NoCost(const OpSignature&, absl::Span<const Type>) { return {}; }

}  // namespace

void AppendTerminatorOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kReturn,
      .name = "return",
      .summary = "ends a function with its results",
      .min_operands = 0,
      .max_operands = -1,
      .min_results = 0,
      .max_results = 0,
      .traits = kTerminator,
      .infer = InferNoResults,
      .cost = NoCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kYield,
      .name = "yield",
      .summary = "ends a loop body with the next carried values",
      .min_operands = 0,
      .max_operands = -1,
      .min_results = 0,
      .max_results = 0,
      .traits = kTerminator | kSpmdOnly,
      .infer = InferNoResults,
      .cost = NoCost,
  });
}

}  // namespace commir::ops
