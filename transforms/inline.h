// inline: replaces every `call` by a copy of its callee's body, so that the passes that
// see one function at a time (propagate-sharding, lower-to-spmd, autodiff, the
// schedules) see the whole program. The callees stay in the module (any function may
// still be run with commir-run --func); dce removes nothing of theirs.
//
// A call's operands take the place of the callee's arguments and the callee's returned
// values that of the call's results; a returned value computed in the callee takes the
// call result's name (the printer makes the copies' other names unique). In a global
// caller, the layouts the callee's signature declares stay requests: where a declared
// argument or result layout differs from the value's, a `reshard` to it is inserted, as
// the callee would have received or returned it; so is a layout written on the call's
// result (a sharding constraint, as on any op's result). Calls inside a callee are inlined too,
// innermost last (the verifier has ruled out recursion).
#ifndef COMMIR_TRANSFORMS_INLINE_H_
#define COMMIR_TRANSFORMS_INLINE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir {

// Inlines every call of `function` (and the calls that brings in); returns how many
// calls were inlined. Fails, changing nothing more, on a call whose callee is missing
// or does not fit it (an unverified module) or on calls nested deeper than the module
// has functions (recursion).
absl::StatusOr<int64_t> InlineCalls(Function& function);
absl::StatusOr<int64_t> InlineCalls(Module& module);

// Whether `function`'s body (loop bodies included) holds a call.
bool HasCalls(const Function& function);

COMMIR_DECLARE_PASS(InlinePass);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_INLINE_H_
