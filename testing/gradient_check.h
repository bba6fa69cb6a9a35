// Test helpers: run a function and its gradient function on the cpu backend and compare
// the gradients with central finite differences.
#ifndef COMMIR_TESTING_GRADIENT_CHECK_H_
#define COMMIR_TESTING_GRADIENT_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "runtime/tensor.h"

namespace commir::testing {

// One tensor per argument of `function`, uniform in [lo, hi), from `seed`: commir-run's
// random inputs (runtime/random_inputs.h) mapped from [-1, 1) onto [lo, hi).
std::vector<runtime::Tensor> UniformInputs(const Function& function, double lo, double hi,
                                           uint64_t seed);

// The largest |analytic - numeric| / (1 + |numeric|) over every element of every argument
// in `wrt` (argument indices; the gradient function returns their gradients after the
// function's own results, in this order). The numeric gradient of the first result is
// (f(x + h) - f(x - h)) / 2h per element. `report` names the worst element.
absl::StatusOr<double> MaxGradientError(const Function& function, const Function& gradient,
                                        const std::vector<int>& wrt,
                                        const std::vector<runtime::Tensor>& inputs, double h,
                                        std::string* report);

}  // namespace commir::testing

#endif  // COMMIR_TESTING_GRADIENT_CHECK_H_
