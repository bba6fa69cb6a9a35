// Common subexpression elimination.
//
// Two ops are equivalent when they have the same kind, the same operands (the same SSA
// values; number literals compare by value, bit for bit, and type), the same attributes
// (in any order; floats compare bit for bit, so 0.0 and -0.0 differ), the same result
// types and the same stream (attribute or operand). A commutative op (OpDef trait
// kCommutative) also matches with its two operands swapped.
//
// An op is replaced by an equivalent op that dominates it: one earlier in the same
// block or in an enclosing block (a loop body may reuse a value computed before the
// loop). Nothing is hoisted, and ops with regions (loops) and terminators are never
// merged. One pass over the function with a scoped hash table: O(number of ops).
#ifndef COMMIR_TRANSFORMS_CSE_H_
#define COMMIR_TRANSFORMS_CSE_H_

#include <cstdint>

#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir {

// Returns the number of ops erased.
int64_t EliminateCommonSubexpressions(Function& function);
int64_t EliminateCommonSubexpressions(Module& module);

COMMIR_DECLARE_PASS(CsePass);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_CSE_H_
