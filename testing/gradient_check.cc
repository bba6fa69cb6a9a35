#include "testing/gradient_check.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "runtime/random_inputs.h"
#include "testing/spmd_check.h"

namespace commir::testing {

std::vector<runtime::Tensor> UniformInputs(const Function& function, double lo, double hi,
                                           uint64_t seed) {
  std::vector<runtime::Tensor> inputs;
  const std::vector<Type>& types = function.arg_types();
  for (size_t a = 0; a < types.size(); ++a) {
    runtime::Tensor tensor(types[a].element_type(), types[a].dims());
    for (int64_t i = 0; i < tensor.num_elements(); ++i) {
      const double unit = runtime::RandomUniformValue(seed, static_cast<int>(a), i);  // [-1, 1)
      tensor.SetFromDouble(i, lo + (hi - lo) * (unit + 1) / 2);
    }
    inputs.push_back(std::move(tensor));
  }
  return inputs;
}

namespace {

absl::StatusOr<double> Loss(const Function& function, const std::vector<runtime::Tensor>& inputs) {
  absl::StatusOr<std::vector<runtime::Tensor>> results =
      testing::RunWithGlobalInputs(function, inputs);
  if (!results.ok()) return results.status();
  return (*results)[0].GetAsDouble(0);
}

}  // namespace

absl::StatusOr<double> MaxGradientError(const Function& function, const Function& gradient,
                                        const std::vector<int>& wrt,
                                        const std::vector<runtime::Tensor>& inputs, double h,
                                        std::string* report) {
  absl::StatusOr<std::vector<runtime::Tensor>> analytic =
      testing::RunWithGlobalInputs(gradient, inputs);
  if (!analytic.ok()) return analytic.status();
  const size_t first_gradient = function.result_types().size();
  if (analytic->size() != first_gradient + wrt.size()) {
    return absl::InternalError("the gradient function returns the wrong number of results");
  }
  double worst = 0;
  for (size_t w = 0; w < wrt.size(); ++w) {
    const runtime::Tensor& grad = (*analytic)[first_gradient + w];
    for (int64_t i = 0; i < inputs[wrt[w]].num_elements(); ++i) {
      std::vector<runtime::Tensor> plus = inputs;
      std::vector<runtime::Tensor> minus = inputs;
      const double x = inputs[wrt[w]].GetAsDouble(i);
      plus[wrt[w]].SetFromDouble(i, x + h);
      minus[wrt[w]].SetFromDouble(i, x - h);
      absl::StatusOr<double> up = Loss(function, plus);
      absl::StatusOr<double> down = Loss(function, minus);
      if (!up.ok()) return up.status();
      if (!down.ok()) return down.status();
      const double numeric = (*up - *down) / (2 * h);
      const double error = std::abs(grad.GetAsDouble(i) - numeric) / (1 + std::abs(numeric));
      if (!(error <= worst)) {  // also catches NaN
        worst = std::isnan(error) ? INFINITY : error;
        *report = absl::StrFormat("argument %d element %d: analytic %.10g, numeric %.10g", wrt[w],
                                  i, grad.GetAsDouble(i), numeric);
      }
    }
  }
  return worst;
}

}  // namespace commir::testing
