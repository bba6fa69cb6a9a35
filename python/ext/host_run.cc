#include "python/ext/host_run.h"

#include "absl/strings/str_format.h"
#include "backend_cpu/cpu_backend.h"
#include "runtime/host_layout.h"
#include "runtime/interpreter.h"

namespace commir::python {

using runtime::Tensor;

absl::StatusOr<std::vector<Tensor>> RunGlobalOnCpu(const Function& function,
                                                   const std::vector<Tensor>& global_inputs,
                                                   Location* error_location) {
  *error_location = Location{};
  cpu::CpuBackend backend;
  runtime::Interpreter interpreter(function, backend);
  const Mesh* mesh = function.is_spmd() ? function.mesh() : nullptr;
  const int64_t devices = interpreter.num_devices();
  std::vector<std::vector<Tensor>> local_inputs(devices);
  for (int64_t d = 0; d < devices; ++d) {
    for (size_t i = 0; i < global_inputs.size(); ++i) {
      absl::StatusOr<Tensor> part =
          runtime::LocalPart(global_inputs[i], function.arg_types()[i], mesh, d);
      if (!part.ok()) return part.status();
      local_inputs[d].push_back(*std::move(part));
    }
  }
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(local_inputs);
  if (!outputs.ok()) {
    *error_location = interpreter.error_location();
    return outputs.status();
  }
  std::vector<Tensor> results;
  for (size_t r = 0; r < function.result_types().size(); ++r) {
    std::vector<const Tensor*> parts;
    for (int64_t d = 0; d < devices; ++d) parts.push_back(&(*outputs)[d][r]);
    absl::StatusOr<Tensor> global = runtime::AssembleGlobal(parts, function.result_types()[r], mesh);
    if (!global.ok()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "result %d of @%s: %s", r, function.name(), global.status().message()));
    }
    results.push_back(*std::move(global));
  }
  return results;
}

}  // namespace commir::python
