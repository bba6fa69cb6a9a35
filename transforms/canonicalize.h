// Canonicalization: constant folding and algebraic identities, applied with a worklist
// until nothing changes.
//
// Rewrites (each keeps every result type exactly, shardings included):
//  - constant folding (option fold-constants): an elementwise unary op, convert, or
//    binary op whose operands are all `full` constants or number literals becomes one
//    `full` of the op's result type (a broadcast of constants is still a splat); index
//    add/sub/mul/div/rem on constants become `full : index`. Values follow the cpu
//    executor bit for bit (transforms/constant_folding.h). Not folded: results that
//    would be `partial`, and folds the executor would reject at run time.
//  - identities, where the result type is exactly the type of x: x*1, 1*x, x+0, 0+x,
//    x-0, x/1, neg(neg(x)), transpose with the identity permutation, reshape,
//    convert, broadcast and reshard to x's own type. For floats, x+0 -> x is applied
//    for either zero, as XLA does: it only differs in the sign of a zero result.
//  - transpose(transpose(x, p), q) -> transpose(x, p o q), and
//    reshape(reshape(x)) -> reshape(x); the inner op stays if something else uses it.
//
// Ops the rewrites leave unused (a replaced op, and the producers that only fed it,
// loops excepted) are erased here; ops that were already unused in the input, and
// loops, are left to `dce`.
#ifndef COMMIR_TRANSFORMS_CANONICALIZE_H_
#define COMMIR_TRANSFORMS_CANONICALIZE_H_

#include <cstdint>

#include "commir/ir.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir {

struct CanonicalizeOptions {
  bool fold_constants = true;
  // Stop after this many rewrites (negative: no limit). Bisects a bad rewrite.
  int64_t max_rewrites = -1;

  static const OptionSchema<CanonicalizeOptions>& Schema();
};

// Returns the number of rewrites applied.
int64_t Canonicalize(Function& function, const CanonicalizeOptions& options = {});
int64_t Canonicalize(Module& module, const CanonicalizeOptions& options = {});

COMMIR_DECLARE_PASS_WITH_OPTIONS(CanonicalizePass, CanonicalizeOptions);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_CANONICALIZE_H_
