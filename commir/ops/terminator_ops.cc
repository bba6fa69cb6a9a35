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
  ops.push_back(OpDef{OpKind::kReturn, "return", "ends a function with its results", 0, -1, 0, 0,
                      {}, kTerminator, InferNoResults, NoCost});
  ops.push_back(OpDef{OpKind::kYield, "yield", "ends a loop body with the next carried values",
                      0, -1, 0, 0, {}, kTerminator | kSpmdOnly, InferNoResults, NoCost});
}

}  // namespace commir::ops
