#include "tools/step_loop.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_format.h"

namespace commir {

absl::StatusOr<int> SteppedParamCount(const Function& function) {
  const std::vector<Type>& results = function.result_types();
  const std::vector<Type>& args = function.arg_types();
  if (results.empty() || results[0].is_index() || !IsFloatType(results[0].element_type()) ||
      results[0].rank() != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--steps: @%s's first result must be the loss, a float scalar; got %s (make a "
        "step function with the training-step pass)",
        function.name(), results.empty() ? "no result" : results[0].ToString()));
  }
  const int num_params = static_cast<int>(results.size()) - 1;
  if (num_params == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--steps: @%s returns only the loss; a step function returns the "
                        "new value of each trained argument after it",
                        function.name()));
  }
  if (num_params > static_cast<int>(args.size())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--steps: @%s returns %d values after the loss but takes only %d arguments to feed "
        "them back into",
        function.name(), num_params, args.size()));
  }
  for (int i = 0; i < num_params; ++i) {
    if (results[i + 1].is_index() || args[i].is_index() ||
        !results[i + 1].SameShapeAndElementType(args[i])) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--steps: @%s's result %d (%s) feeds argument %d (%s) in the next step, but "
          "their shapes or element types differ: results 1..%d must match the first %d "
          "arguments",
          function.name(), i + 1, results[i + 1].ToString(), i, args[i].ToString(), num_params,
          num_params));
    }
  }
  return num_params;
}

absl::StatusOr<const Function*> FindStateInit(const Module& module, const Function& step,
                                             int num_fed) {
  const Function* init = module.FindFunction(step.name() + "_init");
  if (init == nullptr) return nullptr;
  const std::vector<Type>& params = init->arg_types();
  const std::vector<Type>& state = init->result_types();
  const int num_params = static_cast<int>(params.size());
  if (num_params == 0 || num_params + static_cast<int>(state.size()) != num_fed ||
      init->is_spmd() != step.is_spmd()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--steps: @%s takes %d arguments and returns %d values, but the %d values @%s feeds "
        "back are its params then their optimizer state, which @%s takes the params of and "
        "returns",
        init->name(), num_params, state.size(), num_fed, step.name(), init->name()));
  }
  for (int i = 0; i < num_fed; ++i) {
    const Type& want = step.arg_types()[i];
    const Type& have = i < num_params ? params[i] : state[i - num_params];
    if (have.is_index() || want.is_index() || !have.SameShapeAndElementType(want)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "--steps: @%s's %s %d (%s) is @%s's argument %d, which is %s", init->name(),
          i < num_params ? "argument" : "result", i < num_params ? i : i - num_params,
          have.ToString(), step.name(), i, want.ToString()));
    }
  }
  return init;
}

std::optional<Failure> StepLoop::Step(double& loss) {
  const int step = steps_run_ + 1;
  std::vector<runtime::Tensor> results;
  if (auto f = run_(inputs_, results)) return f;
  loss = results[0].ToDouble()[0];
  if (!std::isfinite(loss) && !allow_nonfinite_) {
    return Failure{kExitInvalidInput,
                   absl::StrFormat("error: step %d: the loss is %g (lower the learning "
                                   "rate, or pass --allow-nonfinite)",
                                   step, loss)};
  }
  // The new params become the next step's inputs (moved: one step's tensors are held).
  for (int i = 0; i < num_params_; ++i) inputs_[i] = std::move(results[i + 1]);
  loss_ = std::move(results[0]);
  steps_run_ = step;
  return std::nullopt;
}

std::vector<runtime::Tensor> StepLoop::LastResults() const {
  std::vector<runtime::Tensor> results = {loss_};
  results.insert(results.end(), inputs_.begin(), inputs_.begin() + num_params_);
  return results;
}

std::optional<Failure> RunSteps(int steps, int num_params, std::vector<runtime::Tensor> inputs,
                                const StepRunner& run, bool allow_nonfinite,
                                const StepCallback& on_step,
                                std::vector<runtime::Tensor>& final_results) {
  StepLoop loop(num_params, std::move(inputs), run, allow_nonfinite);
  for (int step = 1; step <= steps; ++step) {
    double loss = 0;
    if (auto f = loop.Step(loss)) return f;
    if (on_step) on_step(step, loss);
  }
  final_results = loop.LastResults();
  return std::nullopt;
}

bool LossesAgree(double actual, double expected, double tolerance) {
  if (!std::isfinite(actual) || !std::isfinite(expected)) {
    return std::isnan(actual) ? std::isnan(expected) : actual == expected;
  }
  return std::abs(actual - expected) <= tolerance * std::max(std::abs(expected), 1e-30);
}

std::string FormatStepLine(int step, double loss, std::optional<double> reference,
                           double tolerance) {
  std::string line = absl::StrFormat("step %d loss %.6f", step, loss);
  if (reference.has_value()) {
    const double diff = std::abs(loss - *reference) / std::max(std::abs(*reference), 1e-30);
    absl::StrAppendFormat(&line, "  reference %.6f  rel_diff %.1e  %s", *reference, diff,
                          LossesAgree(loss, *reference, tolerance) ? "PASS" : "FAIL");
  }
  return line;
}

}  // namespace commir
