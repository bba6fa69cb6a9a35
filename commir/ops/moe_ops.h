// moe_dispatch and moe_collect (docs/language.md, "Mixture of experts"): the pair that
// moves token rows into per-expert buffers of static capacity and back, their op table
// entries and derivative rules, kept together and apart from the other op families.
#ifndef COMMIR_COMMIR_OPS_MOE_OPS_H_
#define COMMIR_COMMIR_OPS_MOE_OPS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "commir/op_def.h"

namespace commir::ops {

void AppendMoeOps(std::vector<OpDef>& ops);

// moe_vjp.cc: the two ops are each other's adjoints. moe_dispatch's cotangent is the
// moe_collect of the buffer's cotangent (summed over the k choices when the rows are
// per token); moe_collect's is the moe_dispatch of its cotangent into a buffer of the
// collected one's shape. The expert indices carry none.
absl::StatusOr<std::vector<Value*>> MoeDispatchVjp(OpBuilder& b, const VjpArgs& args);
absl::StatusOr<std::vector<Value*>> MoeCollectVjp(OpBuilder& b, const VjpArgs& args);

}  // namespace commir::ops

#endif  // COMMIR_COMMIR_OPS_MOE_OPS_H_
