// Running one function of a module on the cpu backend with global tensors in and out:
// a spmd function's inputs are split across its mesh by their layouts and its results
// assembled again (the host layout helpers, as commir-run does); a global function runs
// on one device with whole tensors.
#ifndef COMMIR_PYTHON_EXT_HOST_RUN_H_
#define COMMIR_PYTHON_EXT_HOST_RUN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "runtime/tensor.h"

namespace commir::python {


// Runs `function` with `global_inputs` (one per argument, of the declared global type).
// On failure returns the error and where it happened through `error`.
absl::StatusOr<std::vector<runtime::Tensor>> RunGlobalOnCpu(
    const Function& function, const std::vector<runtime::Tensor>& global_inputs,
    Location* error_location);

}  // namespace commir::python

#endif  // COMMIR_PYTHON_EXT_HOST_RUN_H_
