// Whether a loop's iterations may price attention differently. A causal attention's time
// depends on its q_pos and k_pos values (sim/attention_time.h); in a ring they change at
// every step. The sim backend repeats a loop's iterations in closed form once the
// timeline's state repeats, which presumes that every later iteration issues the kernels
// the earlier ones did: true unless a position depends on the iteration.
#ifndef COMMIR_SIM_ATTENTION_POSITIONS_H_
#define COMMIR_SIM_ATTENTION_POSITIONS_H_

#include "commir/ir.h"

namespace commir::sim {

// True when a causal attention or attention_grad inside `loop` (its body, nested loops,
// and the functions called from them, looked up in `module`) has a position operand that
// may differ between iterations of `loop`: one computed from its induction variable or
// its carried values. Conservative: a position computed from another loop's carried
// value, or from a function's argument, counts as varying; one from a constant, `rank`,
// values defined outside `loop`, or another loop's induction variable (it runs the same
// values in every iteration of `loop`) does not.
bool AttentionPositionsVaryIn(const Operation& loop, const Module* module);

}  // namespace commir::sim

#endif  // COMMIR_SIM_ATTENTION_POSITIONS_H_
