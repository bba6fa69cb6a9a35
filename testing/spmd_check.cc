#include "testing/spmd_check.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/global_run.h"
#include "runtime/random_inputs.h"
#include "transforms/registry/pass_registry.h"
#include "transforms/pipeline.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/spmd_pipeline.h"

namespace commir::testing {

using runtime::Tensor;

absl::Status RunDefaultSpmdPipeline(Module& module, bool propagate) {
  // The pipeline commir-run runs, so that what the tests check is what users get.
  // Without propagation the function's own annotations must be the whole layout.
  return RunPipeline(module, sharding::DefaultSpmdPipeline(propagate), {.verify_each = true});
}

absl::Status RunPartitionPipeline(Module& module, bool propagate) {
  return RunPipeline(module, sharding::PartitionPipeline(propagate), {.verify_each = true});
}

absl::Status ApplyPassPipeline(absl::string_view pipeline, Module& module,
                               absl::Span<const PassInfo> table) {
  // Text: the tests' and recipes' pipelines.
  absl::StatusOr<Pipeline> parsed =
      ParsePipeline(pipeline, table.empty() ? RegisteredPasses() : table);
  if (!parsed.ok()) return parsed.status();
  return RunPipeline(module, *parsed, {.verify_each = true});
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
  runtime::GlobalRunOptions options;
  options.events = events;
  runtime::GlobalRunFailure failure;
  absl::StatusOr<std::vector<Tensor>> results =
      runtime::RunWithGlobalTensors(function, backend, global_inputs, options, &failure);
  if (!results.ok() && failure.stage == runtime::GlobalRunFailure::Stage::kRun) {
    Location loc = failure.location;
    return absl::Status(results.status().code(),
                        absl::StrCat(loc.line, ":", loc.col, ": ", results.status().message()));
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

absl::StatusOr<SpmdCheck> CheckSpmd(const Module& module, absl::string_view function,
                                    const SpmdCheckOptions& options) {
  // The reference runs on `module` itself (running does not change it); the copy is
  // lowered.
  const Function* global = module.FindFunction(function);
  if (global == nullptr) return absl::NotFoundError(absl::StrCat("no function @", function));
  std::unique_ptr<Module> lowered = module.Clone();
  if (options.default_pipeline) {
    absl::Status s = options.combine_all_reduces
                         ? RunDefaultSpmdPipeline(*lowered, options.propagate)
                         : RunPartitionPipeline(*lowered, options.propagate);
    if (!s.ok()) return s;
  }
  if (!options.pipeline.empty()) {
    if (absl::Status s = ApplyPassPipeline(options.pipeline, *lowered, options.passes); !s.ok()) return s;
  }
  SpmdCheck check;
  check.module = std::move(lowered);
  std::vector<Tensor> inputs = RandomGlobalInputs(*global, options.seed);
  absl::StatusOr<std::vector<Tensor>> expected = RunWithGlobalInputs(*global, inputs);
  if (!expected.ok()) return expected.status();
  absl::StatusOr<std::vector<Tensor>> actual =
      RunWithGlobalInputs(*check.module->FindFunction(function), inputs,
                          options.record_events ? &check.events : nullptr);
  if (!actual.ok()) {
    // The program is shown: a failing run is what one debugs.
    return absl::Status(actual.status().code(), absl::StrCat("running the lowered program: ",
                                                             actual.status().message(), "\n",
                                                             PrintModule(*check.module)));
  }
  check.pass = CompareResults(*actual, *expected, &check.report);
  return check;
}

absl::StatusOr<SpmdCheck> CheckSpmd(absl::string_view text, absl::string_view function,
                                    const SpmdCheckOptions& options) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "<text>");
  if (!module.ok()) return module.status();
  absl::StatusOr<SpmdCheck> check = CheckSpmd(**module, function, options);
  if (check.ok()) check->lowered = PrintModule(*check->module);
  return check;
}

absl::StatusOr<SpmdCheck> CheckPartitioned(absl::string_view text, absl::string_view function,
                                           uint64_t seed, bool propagate) {
  SpmdCheckOptions options;
  options.seed = seed;
  options.propagate = propagate;
  return CheckSpmd(text, function, options);
}

absl::StatusOr<SpmdCheck> CheckPartitionOnly(absl::string_view text, absl::string_view function,
                                             uint64_t seed, bool propagate) {
  SpmdCheckOptions options;
  options.seed = seed;
  options.propagate = propagate;
  options.combine_all_reduces = false;
  return CheckSpmd(text, function, options);
}

}  // namespace commir::testing
