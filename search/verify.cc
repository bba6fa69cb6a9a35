#include "search/verify.h"

#include <chrono>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "search/shrink.h"
#include "testing/spmd_check.h"

namespace commir::search {
namespace {

// How many times the kept divisors may double when a pass refuses the shrunk program
// (x8: pipeline chunks up to 8 of a block split over every device).
constexpr int kMaxDoublings = 3;

// Runs the recipe on `program` (the global program, shrunk or a copy).
absl::StatusOr<VerifyOutcome> CheckProgram(std::unique_ptr<Module> program, std::string sizes,
                                           absl::string_view function,
                                           absl::string_view pipeline,
                                           const VerifyOptions& options) {
  VerifyOutcome outcome;
  outcome.sizes = std::move(sizes);
  outcome.checked_program = std::move(program);
  testing::SpmdCheckOptions check_options;
  check_options.seed = options.seed;
  check_options.pipeline = std::string(pipeline);
  check_options.passes = options.passes;
  check_options.default_pipeline = !options.pipeline_is_complete;
  absl::StatusOr<testing::SpmdCheck> check =
      testing::CheckSpmd(*outcome.checked_program, function, check_options);
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
  outcome.lowered_program = std::move(check->module);
  return outcome;
}

}  // namespace

absl::StatusOr<VerifyOutcome> VerifyRecipe(const Module& laid_out, absl::string_view function,
                                           absl::string_view pipeline,
                                           const VerifyOptions& options) {
  auto start = std::chrono::steady_clock::now();
  auto timed = [&](absl::StatusOr<VerifyOutcome> outcome) {
    if (outcome.ok()) {
      outcome->seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    return outcome;
  };
  const Function* global = laid_out.FindFunction(function);
  if (global == nullptr) return absl::NotFoundError(absl::StrCat("no function @", function));
  if (global->is_spmd()) {
    return absl::InvalidArgumentError(
        absl::StrCat("@", function, " is a spmd function: a recipe lays out a global one"));
  }
  if (MaxValueElements(*global) <= options.max_elements_per_value) {
    return timed(CheckProgram(laid_out.Clone(), FormatSizes({}), function, pipeline, options));
  }

  int64_t devices = global->mesh() == nullptr ? 1 : global->mesh()->num_devices();
  int64_t keep = options.keep_divisors_of > 0 ? options.keep_divisors_of
                                              : std::lcm(devices, int64_t{16});
  absl::StatusOr<ShrunkModule> shrunk =
      ShrinkFunction(laid_out, function, keep, options.max_elements_per_value);
  if (!shrunk.ok()) return shrunk.status();
  std::vector<std::pair<int64_t, int64_t>> sizes = shrunk->sizes;
  absl::StatusOr<VerifyOutcome> outcome = CheckProgram(
      std::move(shrunk->module), FormatSizes(sizes), function, pipeline, options);
  // A pass may need more divisibility than the default keeps (pipeline chunks of a block
  // split over many devices): when the recipe cannot be checked at these sizes, try
  // larger ones, within the element limit. A mismatch is never retried.
  for (int i = 0; i < kMaxDoublings && !outcome.ok() && options.keep_divisors_of == 0; ++i) {
    keep *= 2;
    absl::StatusOr<ShrunkModule> larger =
        ShrinkFunction(laid_out, function, keep, options.max_elements_per_value);
    if (!larger.ok()) break;
    if (larger->sizes == sizes) continue;  // nothing divides further
    sizes = larger->sizes;
    outcome = CheckProgram(std::move(larger->module), FormatSizes(sizes), function, pipeline,
                           options);
  }
  return timed(std::move(outcome));
}

}  // namespace commir::search
