// training-step: one SGD training step as one CommIR function.
//
// For `func @f(params..., batch...) -> (loss, ...)` it adds, right after @f (which stays),
//   func @f_step(params..., batch...) -> (loss, new_p for each trained p, in argument order)
// whose body is @f's forward and loss, their backward (the gradient function that
// Differentiate builds, so every derivative rule is autodiff's) and the update
//   new_p = p - lr * dloss/dp
// computed in the gradient's element type (grad-type=f32 with bf16 params: an f32 update
// rounded back to bf16) and returned with p's own type, layout included: a tensor-split
// weight stays split, so the partitioner's weight-gradient collectives appear where the
// layouts put them. @f's other results are not returned; what they alone need is dropped.
//
// The new params come right after the loss so that a runner can feed result i+1 back
// into argument i when the trained params are @f's first arguments (commir-run --steps).
//
// Refused (as autodiff refuses, plus): no `params`, a name that is not an argument or is
// given twice, and an existing @f_step.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_TRAINING_STEP_H_
#define COMMIR_TRANSFORMS_AUTODIFF_TRAINING_STEP_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir {

struct TrainingStepOptions {
  // The trained arguments, by name without '%'; at least one.
  std::vector<std::string> params;
  // The SGD learning rate.
  double learning_rate = 0.05;
  // The gradients' (and so the update's) element type; unset: each param's own.
  std::optional<ElementType> grad_type;
};

// Adds @<function>_step to `module` (after `function`) and returns it. Errors are also
// reported at their location to `diagnostics` when it is not null.
absl::StatusOr<Function*> BuildTrainingStep(Module& module, const Function& function,
                                            const TrainingStepOptions& options,
                                            DiagnosticEngine* diagnostics = nullptr);

// The training-step pass's options.
struct TrainingStepPassOptions {
  std::string func = "";    // "@f"; empty: every global function
  std::string params = "";  // "w1,w2" (required)
  std::string lr = "0.05";  // text, parsed as a finite double by the pass
  GradTypeOption grad_type = GradTypeOption::kSame;

  static const OptionSchema<TrainingStepPassOptions>& Schema();
};

COMMIR_DECLARE_PASS_WITH_OPTIONS(TrainingStepPass, TrainingStepPassOptions);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_TRAINING_STEP_H_
