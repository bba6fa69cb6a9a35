// autodiff: reverse-mode differentiation of global functions.
//
// For `func @f(args...) -> (r0, r1, ...)` it adds, right after @f (which stays),
//   seed=loss:       func @f_grad(args...) -> (r0, r1, ..., d r0/d a for each a in wrt)
//                    r0 must be a float scalar (the loss);
//   seed=cotangents: func @f_grad(args..., c0, c1, ...) -> (r0, ..., sum_i c_i . d r_i/d a)
//                    one cotangent argument per float result (a vector-Jacobian product).
// The gradient function recomputes @f's forward ops, then walks them backwards calling each
// op's derivative rule (OpDef::vjp, in the op definitions). Only ops that both depend on a
// differentiated argument and lead to a seeded result get backward work. An argument that
// the seeded results do not depend on gets a zero gradient.
//
// With remat (see remat.h) the backward of each block first recomputes the block's
// inside from its checkpoints, as ops marked `remat = B`, so the forward keeps only the
// checkpoints and what lies outside blocks.
//
// Refused, with an error at the op or argument: an op on that path with no derivative rule
// (or whose rule refuses), a gradient that
// would have to flow through an integer value, an integer argument named in `wrt`, a
// non-scalar first result with seed=loss, spmd functions, and an existing @f_grad.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_AUTODIFF_H_
#define COMMIR_TRANSFORMS_AUTODIFF_AUTODIFF_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/autodiff/remat.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir {

struct AutodiffOptions {
  // Argument names (without '%') to differentiate with respect to; empty: every float
  // argument.
  std::vector<std::string> wrt;
  // false: seed the first result with 1 (it must be a float scalar); true: take one
  // cotangent argument per float result.
  bool seed_cotangents = false;
  // The element type of every gradient (bf16 forward, f32 gradients); unset: each
  // gradient has its value's element type.
  std::optional<ElementType> grad_type;
  // Activation recomputation (transforms/autodiff/remat.h): kBlocks recomputes each
  // pre-norm residual block's inside in the backward; `remat_at` (value names without
  // '%') checkpoints at those values instead. Giving both is an error.
  RematPolicy remat = RematPolicy::kNone;
  std::vector<std::string> remat_at;
};

// Adds @<function>_grad to `module` (after `function`) and returns it. Errors are also
// reported at their location to `diagnostics` when it is not null.
absl::StatusOr<Function*> Differentiate(Module& module, const Function& function,
                                        const AutodiffOptions& options,
                                        DiagnosticEngine* diagnostics = nullptr);

// The element type of the gradients a pass builds: each value's own, or f32/f64.
enum class GradTypeOption { kSame, kF32, kF64 };
// Its spellings in pipeline text (same, f32, f64), shared by autodiff and training-step.
std::vector<std::pair<std::string, GradTypeOption>> GradTypeSpellings();
// kSame: unset.
std::optional<ElementType> GradElementType(GradTypeOption option);

// The autodiff pass's options (docs/language.md).
struct AutodiffPassOptions {
  enum class Seed { kLoss, kCotangents };
  std::string func = "";  // "@f" or "f"; empty: every global function
  std::string wrt = "";   // "w1,w2"; empty: every float argument
  Seed seed = Seed::kLoss;
  GradTypeOption grad_type = GradTypeOption::kSame;
  RematPolicy remat = RematPolicy::kNone;
  std::string remat_at = "";  // "%r1,%y"

  static const OptionSchema<AutodiffPassOptions>& Schema();
};

COMMIR_DECLARE_PASS_WITH_OPTIONS(AutodiffPass, AutodiffPassOptions);

// One read of a forward value by the backward part of @f_grad.
struct BackwardRead {
  // The value of @f_grad read: the argument or forward copy standing for the forward
  // value, or the log-sum-exp autodiff adds to a differentiated attention's copy (filed
  // under the attention's result).
  Value* value = nullptr;
  // The reading op: a derivative rule's op, a remat block's recomputation (it reads the
  // block's checkpoints), or @f_grad's return where it returns the value as a gradient.
  Operation* user = nullptr;
};

// A gradient function and what its backward keeps of the forward, by identity rather
// than by name: the saved activations are the keys of `saved`.
struct Gradient {
  Function* function = nullptr;
  // Each argument or op result of @f that the backward reads (after dead code is
  // removed), with its reads in @f_grad's order. Values only the forward copy reads, and
  // @f's results returned as @f_grad's leading results, are not in it.
  absl::flat_hash_map<const Value*, std::vector<BackwardRead>> saved;
};

// Differentiate, also returning the map from @f's values to their backward reads.
absl::StatusOr<Gradient> DifferentiateWithSaved(Module& module, const Function& function,
                                                const AutodiffOptions& options,
                                                DiagnosticEngine* diagnostics = nullptr);


}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_AUTODIFF_H_
