#include "search/verify.h"

#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/printer.h"
#include "parser/parser.h"
#include "search/shrink.h"
#include "search/spmd_check.h"

namespace commir::search {

absl::StatusOr<VerifyOutcome> VerifyRecipe(absl::string_view laid_out_text,
                                           absl::string_view function,
                                           absl::string_view pipeline,
                                           const VerifyOptions& options) {
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(laid_out_text, "recipe");
  if (!module.ok()) return module.status();
  const Function* global = (*module)->FindFunction(function);
  if (global == nullptr) return absl::NotFoundError(absl::StrCat("no function @", function));
  if (global->is_spmd()) {
    return absl::InvalidArgumentError(
        absl::StrCat("@", function, " is a spmd function: a recipe lays out a global one"));
  }

  VerifyOutcome outcome;
  outcome.sizes = FormatSizes({});
  outcome.checked_program = std::string(laid_out_text);
  if (MaxValueElements(*global) > options.max_elements_per_value) {
    int64_t devices = global->mesh() == nullptr ? 1 : global->mesh()->num_devices();
    int64_t keep = options.keep_divisors_of > 0 ? options.keep_divisors_of
                                                : std::lcm(devices, int64_t{16});
    absl::StatusOr<ShrunkModule> shrunk =
        ShrinkFunction(**module, function, keep, options.max_elements_per_value);
    if (!shrunk.ok()) return shrunk.status();
    outcome.sizes = FormatSizes(shrunk->sizes);
    outcome.checked_program = PrintModule(*shrunk->module);
  }

  sharding::SpmdCheckOptions check_options;
  check_options.seed = options.seed;
  check_options.pipeline = std::string(pipeline);
  check_options.passes = options.passes;
  check_options.default_pipeline = !options.pipeline_is_complete;
  absl::StatusOr<sharding::SpmdCheck> check =
      sharding::CheckSpmd(outcome.checked_program, function, check_options);
  if (!check.ok()) {
    return absl::Status(check.status().code(),
                        absl::StrCat("checking at sizes ", outcome.sizes, ": ",
                                     check.status().message()));
  }
  // A run of the global program against itself would prove nothing.
  if (const Function* lowered = check->module->FindFunction(function);
      lowered == nullptr || !lowered->is_spmd()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the pipeline leaves @", function, " unlowered: nothing to verify"));
  }
  outcome.matched = check->pass;
  outcome.report = std::move(check->report);
  outcome.lowered_program = std::move(check->lowered);
  outcome.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return outcome;
}

}  // namespace commir::search
