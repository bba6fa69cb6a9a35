// The cost model's estimate for one op of the IR: its OpDef's cost formula applied to the
// op's own operand and result types. Reports, benchmarks and searches ask this rather
// than building the signature themselves.
#ifndef COMMIR_OP_COST_H_
#define COMMIR_OP_COST_H_

#include "commir/ir.h"
#include "commir/op_def.h"

namespace commir {

// FLOPs and bytes of `op`, an op of `function` (per-device types in a spmd function).
OpCost EstimateOpCost(const Operation& op, const Function& function);

}  // namespace commir

#endif  // COMMIR_OP_COST_H_
