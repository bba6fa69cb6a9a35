#include "commir/op_cost.h"

#include <vector>

namespace commir {

OpCost EstimateOpCost(const Operation& op, const Function& function) {
  std::vector<Type> operand_types;
  for (const Value* v : op.operands()) operand_types.push_back(v->type());
  std::vector<Type> result_types;
  for (int r = 0; r < op.num_results(); ++r) result_types.push_back(op.result(r)->type());
  OpSignature sig{operand_types, op.attrs(), result_types, op.num_results(), function.mesh(),
                  function.is_spmd()};
  return op.def().cost(sig, result_types);
}

}  // namespace commir
