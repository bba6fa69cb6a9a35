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
// result (a sharding constraint, as on any op's result). Calls inside a callee are inlined too
// (the verifier has ruled out recursion).
#ifndef COMMIR_TRANSFORMS_INLINE_H_
#define COMMIR_TRANSFORMS_INLINE_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/pass.h"

namespace commir {

// Inlines every call of `function` (and the calls that brings in; the callees stay as
// they are); returns how many calls were inlined. Fails on a call whose callee is
// missing or does not fit it (an unverified module), changing nothing more, and before
// changing anything on recursion or where the calls would copy more than
// kMaxExpandedOps ops (call_graph.h): a bound computed from the call graph, callees
// first, so a function calling the next twice, forty deep, is refused rather than
// expanded. Errors go to `diagnostics` too, at the call, when it is given.
absl::StatusOr<int64_t> InlineCalls(Function& function, DiagnosticEngine* diagnostics = nullptr);
// Every function's calls, callees first (a call copies its callee already inlined): the
// time is linear in the size of the inlined module. The same failures, the bound being
// on the ops copied into the whole module.
absl::StatusOr<int64_t> InlineCalls(Module& module, DiagnosticEngine* diagnostics = nullptr);

// Whether `function`'s body (loop bodies included) holds a call.
bool HasCalls(const Function& function);

COMMIR_DECLARE_PASS(InlinePass);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_INLINE_H_
