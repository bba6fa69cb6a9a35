#include "transforms/schedules/schedule_check.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend_cpu/cpu_backend.h"
#include "backend_cpu/host_layout.h"
#include "commir/printer.h"
#include "commir/verifier.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/random_inputs.h"
#include "transforms/sharding/spmd_check.h"

namespace commir::schedules {

using runtime::Tensor;

absl::StatusOr<std::vector<Tensor>> RunWithGlobalInputs(const Function& function,
                                                        const std::vector<Tensor>& global_inputs,
                                                        std::vector<runtime::OpEvent>* events) {
  cpu::CpuBackend backend;
  runtime::Interpreter interpreter(function, backend);
  if (events != nullptr) interpreter.set_event_sink(events);
  const Mesh* mesh = function.is_spmd() ? function.mesh() : nullptr;
  int64_t devices = interpreter.num_devices();
  std::vector<std::vector<Tensor>> inputs(devices);
  for (int64_t d = 0; d < devices; ++d) {
    for (size_t i = 0; i < global_inputs.size(); ++i) {
      absl::StatusOr<Tensor> part =
          cpu::LocalPart(global_inputs[i], function.arg_types()[i], mesh, d);
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

absl::StatusOr<MatmulScheduleCheck> CheckMatmulSchedule(absl::string_view text,
                                                        absl::string_view function,
                                                        const ScheduleFn& schedule, uint64_t seed) {
  absl::StatusOr<std::unique_ptr<Module>> reference = ParseModuleOrError(text, "input.commir");
  if (!reference.ok()) return reference.status();
  absl::StatusOr<std::unique_ptr<Module>> lowered = ParseModuleOrError(text, "input.commir");
  if (!lowered.ok()) return lowered.status();
  Function* global = (*reference)->FindFunction(function);
  if (global == nullptr) return absl::NotFoundError(absl::StrCat("no function @", function));
  if (absl::Status s = sharding::RunDefaultSpmdPipeline(**lowered); !s.ok()) return s;
  if (absl::Status s = schedule(**lowered); !s.ok()) return s;
  MatmulScheduleCheck check;
  check.printed = PrintModule(**lowered);
  if (absl::Status s = VerifyModule(**lowered); !s.ok()) {
    return absl::InternalError(
        absl::StrCat("invalid IR after the schedule:\n", s.message(), "\n", check.printed));
  }
  Function* spmd = (*lowered)->FindFunction(function);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < global->arg_types().size(); ++i) {
    Type t = global->arg_types()[i];
    inputs.push_back(
        runtime::RandomGlobalTensor(seed, static_cast<int>(i), t.element_type(), t.dims()));
  }
  absl::StatusOr<std::vector<Tensor>> expected = RunWithGlobalInputs(*global, inputs, nullptr);
  if (!expected.ok()) return expected.status();
  absl::StatusOr<std::vector<Tensor>> actual = RunWithGlobalInputs(*spmd, inputs, &check.events);
  if (!actual.ok()) {
    return absl::Status(actual.status().code(),
                        absl::StrCat("running the scheduled program: ", actual.status().message(),
                                     "\n", check.printed));
  }
  check.pass = expected->size() == actual->size();
  for (size_t r = 0; r < expected->size() && r < actual->size(); ++r) {
    double tolerance = runtime::DefaultTolerance((*expected)[r].element_type());
    runtime::Comparison c = runtime::CompareWithReference(absl::StrCat("result", r), (*actual)[r],
                                                          (*expected)[r], tolerance);
    absl::StrAppend(&check.report, runtime::FormatComparison(c), "\n");
    check.pass &= c.pass;
  }
  check.scheduled = *std::move(lowered);
  return check;
}

}  // namespace commir::schedules
