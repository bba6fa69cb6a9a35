// dropout's per-device form: each device's block draws the mask of its elements in the
// whole tensor, so the partitioned program drops exactly what the one device drops.
#include <utility>
#include <vector>

#include "commir/status_macros.h"
#include "transforms/sharding/decompositions.h"

namespace commir::sharding {

DecompositionResult DecomposeDropout(const DecompositionInput& in) {
  const Operation& op = in.op;
  const std::vector<int64_t>& global = in.global_operand_types[0].dims();
  Value* x = in.operands[0].value;
  const std::vector<int64_t>& local = x->type().dims();
  bool split = false;
  for (size_t d = 0; d < global.size(); ++d) split |= local[d] != global[d];
  if (!split) return std::nullopt;  // each device holds the whole tensor
  OpBuilder& e = in.emitter;
  std::vector<OpBuilder::Operand> operands = {x};
  // The step (a replicated scalar) stays before the offsets.
  if (op.num_operands() > 1) operands.push_back(in.operands[1]);
  // The offset of a whole dimension: an index value (dropout takes no number literals,
  // which would be typed as its tensor operand).
  Value* zero = nullptr;
  for (size_t d = 0; d < global.size(); ++d) {
    const AxisList& axes = in.choice.strategy.factors[in.rule.operands[0].dims[d][0]];
    if (axes.empty()) {
      if (zero == nullptr) {
        AttrDict value;
        value.Set("value", Attribute::Int(0));
        const Type index[] = {Type::Index()};
        COMMIR_ASSIGN_OR_RETURN(zero, e.CreateValue(OpKind::kFull, {}, std::move(value), index));
      }
      operands.push_back(zero);
      continue;
    }
    // Dimension d is split in equal blocks over `axes`, in their rank order: this
    // device's block starts at rank * local size.
    COMMIR_ASSIGN_OR_RETURN(Value* rank, e.CreateValue(OpKind::kRank, {}, AxisAttrs(axes)));
    COMMIR_ASSIGN_OR_RETURN(
        Value* offset,
        e.CreateValue(OpKind::kMul, {rank, OpBuilder::Operand::Literal(static_cast<double>(local[d]),
                                                                       Type::Index())}));
    operands.push_back(offset);
  }
  AttrDict attrs = op.attrs();
  attrs.Set("global_shape", Attribute::IntList(global));
  COMMIR_ASSIGN_OR_RETURN(Operation * local_op,
                          e.Create(OpKind::kDropout, operands, std::move(attrs), {}, 1));
  return local_op->results();
}

}  // namespace commir::sharding
