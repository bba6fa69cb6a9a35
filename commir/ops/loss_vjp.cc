// Derivative rule of cross_entropy: one cross_entropy_grad op, which reuses the forward's
// log-sum-exp instead of normalising the logits again.
#include "commir/ops/op_helpers.h"
#include "commir/ops/vjp_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {

absl::StatusOr<std::vector<Value*>> CrossEntropyVjp(OpBuilder& b, const VjpArgs& args) {
  const Operation& op = args.op;
  // The lse result is the backward's saved statistic; a program that differentiates
  // through it (rather than through the loss) asks for a derivative this rule does not
  // build.
  if (args.result_cotangents.size() > 1 && args.result_cotangents[1] != nullptr) {
    return OpError("cross_entropy: only the loss is differentiable, not the lse result");
  }
  Value* g = args.result_cotangents[0];
  Value* dlogits = b.Op(OpKind::kCrossEntropyGrad, {op.operand(0), op.operand(1), op.result(1), g},
                        op.attrs());
  return Finish(b, {dlogits, nullptr});
}

}  // namespace commir::ops
