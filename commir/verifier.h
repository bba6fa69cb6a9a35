// The verifier: every rule of the spec that a module must satisfy (SSA dominance,
// types and shardings, op shape rules, where each op may appear, terminators and
// returns against signatures). Passes call it between steps with --verify-each.
#ifndef COMMIR_COMMIR_VERIFIER_H_
#define COMMIR_COMMIR_VERIFIER_H_

#include "absl/status/status.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"

namespace commir {

// Reports every problem found into `diagnostics`. Values without a type (left by a
// parse error) are skipped silently so that one mistake is reported once.
void VerifyModule(Module& module, DiagnosticEngine& diagnostics);

// Convenience for code without the source text: OK, or InvalidArgument listing each
// problem as "LINE:COL: error: MESSAGE".
absl::Status VerifyModule(Module& module);

}  // namespace commir

#endif  // COMMIR_COMMIR_VERIFIER_H_
