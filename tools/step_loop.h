// commir-run --steps=N: a training-step function (the training-step pass makes them) run
// N times, each run's new params fed back as the next run's arguments.
//
// The feedback rule: a step function returns (loss, p1', ..., pK') with the loss a float
// scalar and K >= 1; result i+1 feeds argument i, so it must have argument i's shape and
// element type (its first K arguments are the trained params; the rest, the batch, stay).
// Every other signature is refused with a message that says which result broke the rule.
//
// An optimizer with state (training-step's adamw) feeds its state the same way: the state
// arguments follow the params, and `@<step>_init(params...) -> (state...)` beside the step
// function gives the state before the first step (zero moments, f32 master copies).
#ifndef COMMIR_TOOLS_STEP_LOOP_H_
#define COMMIR_TOOLS_STEP_LOOP_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "runtime/tensor.h"
#include "tools/program_loader.h"

namespace commir {

// K, the number of params `function` updates, or why it is not a step function.
absl::StatusOr<int> SteppedParamCount(const Function& function);

// `@<step>_init` of `module` when it exists: null when it does not, an error when its
// signature does not give the state the rule above feeds: P >= 1 arguments with the types
// of the step's first P arguments, and results with the types of its arguments
// P..num_fed-1 (num_fed: SteppedParamCount).
absl::StatusOr<const Function*> FindStateInit(const Module& module, const Function& step,
                                             int num_fed);

// One run of the step function: inputs in, results out (a failure carries its exit code).
using StepRunner = std::function<std::optional<Failure>(const std::vector<runtime::Tensor>&,
                                                        std::vector<runtime::Tensor>&)>;

// One step function's state between steps: its next inputs. Only the current step's
// tensors are held, whatever the number of steps.
class StepLoop {
 public:
  StepLoop(int num_params, std::vector<runtime::Tensor> inputs, StepRunner run,
           bool allow_nonfinite)
      : num_params_(num_params),
        inputs_(std::move(inputs)),
        run_(std::move(run)),
        allow_nonfinite_(allow_nonfinite) {}

  // Runs the next step, feeding results 1..num_params into arguments 0..num_params-1,
  // and sets `loss`. A loss that is not finite is a failure (exit 1) unless
  // `allow_nonfinite`: a diverged run has no curve left to compare.
  std::optional<Failure> Step(double& loss);
  int steps_run() const { return steps_run_; }
  // A copy of the last step's results: the loss, then the updated params.
  std::vector<runtime::Tensor> LastResults() const;

 private:
  int num_params_;
  std::vector<runtime::Tensor> inputs_;
  StepRunner run_;
  bool allow_nonfinite_;
  int steps_run_ = 0;
  runtime::Tensor loss_;  // the last step's; its params are inputs_[0..num_params)
};

// Called after each step with its number (from 1) and loss, as soon as the step ends, so
// a report can show each step while the next runs (and keeps them if a later one fails).
using StepCallback = std::function<void(int step, double loss)>;

// Runs `run` `steps` times from `inputs` (see StepLoop), calling `on_step` after each
// step; `final_results` gets the last step's results.
std::optional<Failure> RunSteps(int steps, int num_params, std::vector<runtime::Tensor> inputs,
                                const StepRunner& run, bool allow_nonfinite,
                                const StepCallback& on_step,
                                std::vector<runtime::Tensor>& final_results);

// Whether two losses agree: |actual - expected| <= tolerance * max(|expected|, 1e-30).
bool LossesAgree(double actual, double expected, double tolerance);

// "step 3 loss 0.812340", or with a reference
// "step 3 loss 0.812340  reference 0.812340  rel_diff 1.2e-08  PASS".
std::string FormatStepLine(int step, double loss, std::optional<double> reference,
                           double tolerance);

}  // namespace commir

#endif  // COMMIR_TOOLS_STEP_LOOP_H_
