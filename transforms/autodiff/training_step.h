// training-step: one training step (SGD or AdamW) as one CommIR function.
//
// For `func @f(params..., batch...) -> (loss, ...)` it adds, right after @f (which stays),
//   func @f_step(params..., state..., batch...) -> (loss, new_p..., new_state...)
// whose body is @f's forward and loss, their backward (the gradient function that
// Differentiate builds, so every derivative rule is autodiff's) and the update. Each new
// value is returned with its input's type, layout included: a tensor-split weight (and
// its moments) stays split, so the partitioner's weight-gradient collectives appear where
// the layouts put them. @f's other results are not returned; what they alone need is
// dropped.
//
// SGD (the default) has no state: new_p = p - lr * dloss/dp, computed in the gradient's
// element type (grad-type=f32 with bf16 params: an f32 update rounded back to bf16).
//
// AdamW is torch.optim.AdamW (transforms/autodiff/optimizer_update.h). Its state comes
// right after the last trained param, in this order, each an argument and a result:
//   %<p>_master  f32, for each param narrower than f32 (bf16, f16): the master weight the
//                update runs on; the new param is it rounded to the param's type;
//   %<p>_m, %<p>_v  the moments, in the update type (f32, or f64 for an f64 param);
//   %step        f32[], the number of steps taken (torch's state['step']).
// A second function @f_step_init(params...) -> (state...) gives the state before the
// first step: the masters are the params widened, the moments and the step count zero.
//
// Gradient clipping (option clip_grad_norm=C, with either optimizer) scales every gradient by
// min(1, C / (norm + 1e-6)), norm the 2-norm over all trained params' gradients, as
// torch.nn.utils.clip_grad_norm_ does.
//
// Dropout: a function that draws dropout gets a step count in its state whatever the
// optimizer (AdamW's %step; with SGD %step: f32[] is the only state, plus one each step,
// with @f_step_init), and every dropout of the step, forward and backward, takes it as
// its step operand (converted to i64): step s draws Philox's counter (element, s) under
// the seed attribute, a new mask each step and the same one on every device.
//
// The new values come right after the loss, in argument order, so that a runner can feed
// result i+1 back into argument i when the trained params are @f's first arguments
// (commir-run --steps).
//
// Refused (as autodiff refuses, plus): no `params`, a name that is not an argument or is
// given twice, out-of-range hyperparameters, and an existing @f_step or @f_step_init.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_TRAINING_STEP_H_
#define COMMIR_TRANSFORMS_AUTODIFF_TRAINING_STEP_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/diagnostics.h"
#include "commir/ir.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/autodiff/optimizer_update.h"
#include "transforms/autodiff/optimizer_option.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir {

struct TrainingStepOptions {
  // The trained arguments, by name without '%'; at least one.
  std::vector<std::string> params;
  // The SGD learning rate (AdamW has its own).
  double learning_rate = 0.05;
  // The gradients' element type; unset: each param's own.
  std::optional<ElementType> grad_type;
  // Set: AdamW with these hyperparameters instead of SGD.
  std::optional<AdamWHyperparameters> adamw;
  // Set: clip the gradients to this global 2-norm (> 0) before the update.
  std::optional<double> clip_grad_norm;
};

// Adds @<function>_step to `module` (after `function`; with AdamW, @<function>_step_init
// after it) and returns the step. Errors are also
// reported at their location to `diagnostics` when it is not null.
absl::StatusOr<Function*> BuildTrainingStep(Module& module, const Function& function,
                                            const TrainingStepOptions& options,
                                            DiagnosticEngine* diagnostics = nullptr);

// The training-step pass's options.
struct TrainingStepPassOptions {
  std::string func = "";    // "@f"; empty: every global function
  std::string params = "";  // "w1,w2" (required)
  std::string lr = "0.05";  // SGD's; text, parsed as a finite double by the pass
  GradTypeOption grad_type = GradTypeOption::kSame;
  OptimizerOption optimizer;  // sgd (default, with `lr`) or adamw{...}
  double clip_grad_norm = 0;  // 0: no clipping

  static const OptionSchema<TrainingStepPassOptions>& Schema();
};

COMMIR_DECLARE_PASS_WITH_OPTIONS(TrainingStepPass, TrainingStepPassOptions);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_TRAINING_STEP_H_
