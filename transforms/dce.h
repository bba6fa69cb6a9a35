// Dead code elimination.
//
// Every CommIR op is free of side effects except the terminators (return, yield), so an
// op is live only if a value it defines flows into a function's return. Liveness is
// computed once per function (through loop-carried values: a carried value is live if
// the loop's result for it or its body argument is used by something live), then
//  - dead ops are erased, including whole loops and dead ops inside loop bodies;
//  - carried values of a live loop that nothing live reads are dropped from the loop
//    (its init operand, body argument, yield operand and result), which also frees the
//    ops that only computed them.
// Function arguments are part of the signature and stay.
#ifndef COMMIR_TRANSFORMS_DCE_H_
#define COMMIR_TRANSFORMS_DCE_H_

#include <cstdint>

#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir {

struct DceStats {
  int64_t ops_erased = 0;  // a dead loop counts once, whatever its body holds
  int64_t carried_values_dropped = 0;
};

DceStats EliminateDeadCode(Function& function);
DceStats EliminateDeadCode(Module& module);

COMMIR_DECLARE_PASS(DcePass);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_DCE_H_
