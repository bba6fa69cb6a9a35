#include "testing/spmd_check.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/host_layout.h"
#include "runtime/random_inputs.h"
#include "transforms/pass_manager.h"
#include "transforms/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/lower.h"

namespace commir::sharding {

using runtime::Tensor;

absl::Status RunDefaultSpmdPipeline(Module& module, bool propagate) {
  // The pipeline commir-run runs, so that what the tests check is what users get.
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline(kDefaultSpmdPipeline, RegisteredPasses());
  if (!passes.ok()) return passes.status();
  PassManager manager;
  manager.set_verify_each(true);
  for (std::unique_ptr<Pass>& pass : *passes) {
    // Without propagation the function's own annotations must be the whole layout.
    if (!propagate && pass->name() == "propagate-sharding") continue;
    manager.AddPass(std::move(pass));
  }
  return manager.Run(module);
}

absl::Status ApplyPassPipeline(absl::string_view pipeline, Module& module) {
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline(pipeline, RegisteredPasses());
  if (!passes.ok()) return passes.status();
  PassManager manager;
  manager.set_verify_each(true);
  manager.AddPasses(*std::move(passes));
  return manager.Run(module);
}

std::vector<Tensor> RandomGlobalInputs(const Function& function, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < function.arg_types().size(); ++i) {
    Type t = function.arg_types()[i];
    inputs.push_back(
        runtime::RandomGlobalTensor(seed, static_cast<int>(i), t.element_type(), t.dims()));
  }
  return inputs;
}

absl::StatusOr<std::vector<Tensor>> RunWithGlobalInputs(const Function& function,
                                                        const std::vector<Tensor>& global_inputs,
                                                        std::vector<runtime::OpEvent>* events) {
  cpu::CpuBackend backend;
  runtime::Interpreter interpreter(function, backend);
  if (events != nullptr) interpreter.set_event_sink(events);
  const Mesh* mesh = function.is_spmd() ? function.mesh() : nullptr;
  const int64_t devices = interpreter.num_devices();
  std::vector<std::vector<Tensor>> inputs(devices);
  for (int64_t d = 0; d < devices; ++d) {
    for (size_t i = 0; i < global_inputs.size(); ++i) {
      absl::StatusOr<Tensor> part =
          runtime::LocalPart(global_inputs[i], function.arg_types()[i], mesh, d);
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
    absl::StatusOr<Tensor> global = runtime::AssembleGlobal(parts, function.result_types()[r], mesh);
    if (!global.ok()) return global.status();
    results.push_back(*std::move(global));
  }
  return results;
}

bool CompareResults(const std::vector<Tensor>& actual, const std::vector<Tensor>& expected,
                    std::string* report) {
  bool pass = expected.size() == actual.size();
  for (size_t r = 0; r < expected.size() && r < actual.size(); ++r) {
    double tolerance = runtime::DefaultTolerance(expected[r].element_type());
    runtime::Comparison c = runtime::CompareWithReference(absl::StrCat("result", r), actual[r],
                                                          expected[r], tolerance);
    absl::StrAppend(report, runtime::FormatComparison(c), "\n");
    pass &= c.pass;
  }
  return pass;
}

absl::StatusOr<SpmdCheck> CheckSpmd(absl::string_view text, absl::string_view function,
                                    const SpmdCheckOptions& options) {
  absl::StatusOr<std::unique_ptr<Module>> reference = ParseModuleOrError(text, "input.commir");
  if (!reference.ok()) return reference.status();
  absl::StatusOr<std::unique_ptr<Module>> lowered = ParseModuleOrError(text, "input.commir");
  if (!lowered.ok()) return lowered.status();
  Function* global = (*reference)->FindFunction(function);
  if (global == nullptr) return absl::NotFoundError(absl::StrCat("no function @", function));
  if (absl::Status s = RunDefaultSpmdPipeline(**lowered, options.propagate); !s.ok()) return s;
  if (!options.pipeline.empty()) {
    if (absl::Status s = ApplyPassPipeline(options.pipeline, **lowered); !s.ok()) return s;
  }
  SpmdCheck check;
  check.module = *std::move(lowered);
  check.lowered = PrintModule(*check.module);
  std::vector<Tensor> inputs = RandomGlobalInputs(*global, options.seed);
  absl::StatusOr<std::vector<Tensor>> expected = RunWithGlobalInputs(*global, inputs);
  if (!expected.ok()) return expected.status();
  absl::StatusOr<std::vector<Tensor>> actual =
      RunWithGlobalInputs(*check.module->FindFunction(function), inputs,
                          options.record_events ? &check.events : nullptr);
  if (!actual.ok()) {
    return absl::Status(actual.status().code(), absl::StrCat("running the lowered program: ",
                                                             actual.status().message(), "\n",
                                                             check.lowered));
  }
  check.pass = CompareResults(*actual, *expected, &check.report);
  return check;
}

absl::StatusOr<SpmdCheck> CheckPartitioned(absl::string_view text, absl::string_view function,
                                           uint64_t seed, bool propagate) {
  SpmdCheckOptions options;
  options.seed = seed;
  options.propagate = propagate;
  return CheckSpmd(text, function, options);
}

}  // namespace commir::sharding
