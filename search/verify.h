// The proof of a search candidate: its recipe (a global program laid out on its mesh, and
// the passes applied after the default spmd pipeline, or the whole pipeline) is applied to a shrunken copy of
// the program (shrink.h: the same divisibility, small enough for the cpu mesh) and its
// run on every device of the mesh is compared with the one-device run of the global
// program, on the same random inputs.
#ifndef COMMIR_SEARCH_VERIFY_H_
#define COMMIR_SEARCH_VERIFY_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "transforms/pipeline.h"

namespace commir::search {

struct VerifyOptions {
  uint64_t seed = 0;  // of the random inputs
  // The shrunk copy's values have at most this many elements; a program whose values
  // all fit already is checked as it is. The default keeps an 8-device transformer
  // block well under a second.
  int64_t max_elements_per_value = 1 << 16;
  // Every dimension keeps its divisibility by each divisor of this number. 0: lcm(the
  // mesh's device count, 16), which keeps splits over any mesh axis and zigzag halves
  // working, doubled up to 3 times while a pass refuses the shrunk program (pipeline
  // chunks up to 8 of a block split over every device) and the values stay within
  // max_elements_per_value.
  int64_t keep_divisors_of = 0;
  // Whether `pipeline` is the whole pipeline (what commir-opt --pass-pipeline runs on the
  // laid-out program, the default spmd pipeline included) rather than the passes after it.
  bool pipeline_is_complete = false;
  // The table the pipeline is parsed with (empty: the registered passes).
  absl::Span<const PassInfo> passes;
};

struct VerifyOutcome {
  // Every result within its element type's default tolerance.
  bool matched = false;
  // One line per result (runtime::FormatComparison).
  std::string report;
  // The shrunk sizes, "4096->64, 128->64", or "unchanged".
  std::string sizes;
  // The global program that was checked (a shrunk copy, or a copy of the recipe's when
  // it was small enough), and its lowered form.
  std::unique_ptr<Module> checked_program;
  std::unique_ptr<Module> lowered_program;
  double seconds = 0;
};

// Checks the recipe: @`function` of `laid_out` (which is not changed; the checks run on
// copies) and `pipeline`. A mismatch is an outcome (matched = false); a recipe that
// cannot be checked (a function that cannot be shrunk, a pass that fails, a pipeline
// that leaves the function unlowered, a run that fails) is an error status saying why,
// with the line and column of the program `laid_out` was read from where there is one.
absl::StatusOr<VerifyOutcome> VerifyRecipe(const Module& laid_out,
                                           absl::string_view function,
                                           absl::string_view pipeline,
                                           const VerifyOptions& options = {});

}  // namespace commir::search

#endif  // COMMIR_SEARCH_VERIFY_H_
