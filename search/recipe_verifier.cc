#include "search/recipe_verifier.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend_cpu/cpu_backend.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/global_run.h"
#include "runtime/random_inputs.h"
#include "transforms/pass_manager.h"
#include "transforms/pass_registry.h"
#include "transforms/pipeline.h"

namespace commir::search {
namespace {

using runtime::Tensor;

absl::StatusOr<std::vector<Tensor>> RunOnCpu(const Function& function,
                                             const std::vector<Tensor>& inputs) {
  cpu::CpuBackend backend;
  return runtime::RunWithGlobalTensors(function, backend, inputs);
}

Verdict Check(const Candidate& c, const std::string& function_name) {
  Verdict v;
  absl::StatusOr<std::unique_ptr<Module>> reference = ParseModuleOrError(c.global_text, "global");
  absl::StatusOr<std::unique_ptr<Module>> lowered = ParseModuleOrError(c.global_text, "global");
  if (!reference.ok() || !lowered.ok()) {
    return {Verdict::State::kFailed, std::string((reference.ok() ? lowered : reference).status().message())};
  }
  absl::StatusOr<std::vector<std::unique_ptr<Pass>>> passes =
      ParsePassPipeline(c.pipeline, RegisteredPasses());
  if (!passes.ok()) return {Verdict::State::kFailed, std::string(passes.status().message())};
  PassManager manager;
  manager.set_verify_each(true);
  manager.AddPasses(*std::move(passes));
  if (absl::Status s = manager.Run(**lowered); !s.ok()) {
    return {Verdict::State::kFailed, std::string(s.message())};
  }
  const Function* global = (*reference)->FindFunction(function_name);
  const Function* spmd = (*lowered)->FindFunction(function_name);
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < global->arg_types().size(); ++i) {
    Type t = global->arg_types()[i];
    inputs.push_back(runtime::RandomGlobalTensor(0, static_cast<int>(i), t.element_type(), t.dims()));
  }
  absl::StatusOr<std::vector<Tensor>> expected = RunOnCpu(*global, inputs);
  absl::StatusOr<std::vector<Tensor>> actual = RunOnCpu(*spmd, inputs);
  if (!expected.ok()) return {Verdict::State::kFailed, std::string(expected.status().message())};
  if (!actual.ok()) return {Verdict::State::kFailed, std::string(actual.status().message())};
  bool pass = expected->size() == actual->size();
  for (size_t r = 0; r < expected->size() && r < actual->size(); ++r) {
    runtime::Comparison cmp = runtime::CompareWithReference(
        absl::StrCat("result", r), (*actual)[r], (*expected)[r],
        runtime::DefaultTolerance((*expected)[r].element_type()));
    absl::StrAppend(&v.detail, runtime::FormatComparison(cmp), "\n");
    pass &= cmp.pass;
  }
  v.state = pass ? Verdict::State::kMatched : Verdict::State::kMismatched;
  return v;
}

}  // namespace

std::function<Verdict(const Candidate&)> CpuMeshVerifier(int64_t devices) {
  (void)devices;
  return [](const Candidate& c) {
    // The function name is the one in the candidate's programs.
    absl::StatusOr<std::unique_ptr<Module>> m = ParseModuleOrError(c.global_text, "global");
    if (!m.ok()) return Verdict{Verdict::State::kFailed, std::string(m.status().message())};
    return Check(c, (*m)->functions().front()->name());
  };
}

}  // namespace commir::search
