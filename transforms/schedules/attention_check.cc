#include "transforms/schedules/attention_check.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend_cpu/cpu_backend.h"
#include "backend_cpu/host_layout.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/interpreter.h"
#include "runtime/random_inputs.h"
#include "transforms/sharding/spmd_check.h"

namespace commir::schedules {
namespace {

using runtime::Tensor;

// Runs `function` on its devices with `global_inputs` split by the declared layouts and
// assembles the global results.
absl::StatusOr<std::vector<Tensor>> RunOnCpu(const Function& function,
                                             const std::vector<Tensor>& global_inputs) {
  cpu::CpuBackend backend;
  runtime::Interpreter interpreter(function, backend);
  const Mesh* mesh = function.is_spmd() ? function.mesh() : nullptr;
  const int64_t devices = interpreter.num_devices();
  std::vector<std::vector<Tensor>> inputs(devices);
  for (int64_t d = 0; d < devices; ++d) {
    for (size_t i = 0; i < global_inputs.size(); ++i) {
      absl::StatusOr<Tensor> part = cpu::LocalPart(global_inputs[i], function.arg_types()[i], mesh, d);
      if (!part.ok()) return part.status();
      inputs[d].push_back(*std::move(part));
    }
  }
  absl::StatusOr<std::vector<std::vector<Tensor>>> outputs = interpreter.Run(inputs);
  if (!outputs.ok()) {
    Location loc = interpreter.error_location();
    return absl::Status(outputs.status().code(),
                        absl::StrCat(loc.line, ":", loc.col, ": ", outputs.status().message()));
  }
  std::vector<Tensor> results;
  for (size_t r = 0; r < function.result_types().size(); ++r) {
    std::vector<const Tensor*> parts;
    for (int64_t d = 0; d < devices; ++d) parts.push_back(&(*outputs)[d][r]);
    absl::StatusOr<Tensor> global = cpu::AssembleGlobal(parts, function.result_types()[r], mesh);
    if (!global.ok()) return global.status();
    results.push_back(*std::move(global));
  }
  return results;
}

}  // namespace

absl::StatusOr<ScheduleCheck> CheckSchedule(absl::string_view text, absl::string_view function,
                                            const std::function<absl::Status(Module&)>& schedule,
                                            uint64_t seed) {
  absl::StatusOr<std::unique_ptr<Module>> reference = ParseModuleOrError(text, "input.commir");
  if (!reference.ok()) return reference.status();
  absl::StatusOr<std::unique_ptr<Module>> scheduled = ParseModuleOrError(text, "input.commir");
  if (!scheduled.ok()) return scheduled.status();
  Function* global = (*reference)->FindFunction(function);
  if (global == nullptr) return absl::NotFoundError(absl::StrCat("no function @", function));
  if (absl::Status s = sharding::RunDefaultSpmdPipeline(**scheduled); !s.ok()) return s;
  if (absl::Status s = schedule(**scheduled); !s.ok()) return s;
  ScheduleCheck check;
  check.scheduled = PrintModule(**scheduled);
  if (absl::Status s = VerifyModule(**scheduled); !s.ok()) {
    return absl::InternalError(absl::StrCat("invalid IR after the schedule:\n", s.message(), "\n",
                                            check.scheduled));
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < global->arg_types().size(); ++i) {
    Type t = global->arg_types()[i];
    inputs.push_back(runtime::RandomGlobalTensor(seed, static_cast<int>(i), t.element_type(), t.dims()));
  }
  absl::StatusOr<std::vector<Tensor>> expected = RunOnCpu(*global, inputs);
  if (!expected.ok()) return expected.status();
  absl::StatusOr<std::vector<Tensor>> actual = RunOnCpu(*(*scheduled)->FindFunction(function), inputs);
  if (!actual.ok()) {
    return absl::Status(actual.status().code(), absl::StrCat("running the schedule: ",
                                                             actual.status().message(), "\n",
                                                             check.scheduled));
  }
  check.pass = expected->size() == actual->size();
  for (size_t r = 0; r < expected->size() && r < actual->size(); ++r) {
    double tolerance = runtime::DefaultTolerance((*expected)[r].element_type());
    runtime::Comparison c = runtime::CompareWithReference(absl::StrCat("result", r), (*actual)[r],
                                                          (*expected)[r], tolerance);
    absl::StrAppend(&check.report, runtime::FormatComparison(c), "\n");
    check.pass &= c.pass;
  }
  return check;
}

}  // namespace commir::schedules
