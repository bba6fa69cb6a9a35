// Lowers a global function with the default spmd pipeline, optionally applies more passes
// (a schedule), and checks the multi-device run on the cpu backend against the one-device
// run of the global function (what `commir-run --check` does). The partitioner, schedule
// and autodiff tests use it, and so does the search's proof of a candidate
// (search/verify.h): it is not test-only, but it is the check the tests share, so it lives
// with the other test helpers, below the search.
#ifndef COMMIR_TESTING_SPMD_CHECK_H_
#define COMMIR_TESTING_SPMD_CHECK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "commir/ir.h"
#include "runtime/interpreter.h"
#include "runtime/tensor.h"
#include "transforms/pipeline.h"

namespace commir::testing {

// Runs the partitioner's default pipeline (kDefaultSpmdPipeline: propagate-sharding,
// lower-to-spmd, canonicalize, cse, dce, combine-all-reduces) on `module`, leaving out
// propagate-sharding when `propagate` is false, and verifying the IR after each pass.
absl::Status RunDefaultSpmdPipeline(Module& module, bool propagate = true);

// The same without combine-all-reduces (kPartitionPipeline): one all_reduce per reshard.
absl::Status RunPartitionPipeline(Module& module, bool propagate = true);

// Applies the passes of `pipeline` (pass-pipeline text, e.g.
// "ring-attention{zigzag=true}") to `module`, verifying the IR after each. The names are
// looked up in `passes` (empty: the registered passes).
absl::Status ApplyPassPipeline(absl::string_view pipeline, Module& module,
                               absl::Span<const PassInfo> passes = {});

// One random global tensor per argument of `function`, from `seed`.
std::vector<runtime::Tensor> RandomGlobalInputs(const Function& function, uint64_t seed);

// Runs `function` on the cpu backend on every device of its mesh (one for a global
// function), each device given its part of `global_inputs` by the declared layouts, and
// assembles the global results. Per-op events go to `events` if not null.
absl::StatusOr<std::vector<runtime::Tensor>> RunWithGlobalInputs(
    const Function& function, const std::vector<runtime::Tensor>& global_inputs,
    std::vector<runtime::OpEvent>* events = nullptr);

// Compares each result of `actual` with `expected` at its element type's default
// tolerance, one line per result (runtime::FormatComparison) appended to `report`.
// True if the counts agree and every result is within tolerance.
bool CompareResults(const std::vector<runtime::Tensor>& actual,
                    const std::vector<runtime::Tensor>& expected, std::string* report);

struct SpmdCheckOptions {
  uint64_t seed = 0;       // of the random inputs
  bool propagate = true;   // run propagate-sharding before lower-to-spmd
  // Run the default pipeline first; false: `pipeline` is the whole pipeline (as
  // commir-opt --pass-pipeline runs it).
  bool default_pipeline = true;
  // With default_pipeline: false leaves out its last pass, combine-all-reduces
  // (kPartitionPipeline), for tests of the partitioner's own collectives.
  bool combine_all_reduces = true;
  std::string pipeline;    // passes applied after the default pipeline ("": none)
  bool record_events = false;  // keep the lowered run's per-op events
  // The table `pipeline` is parsed with (empty: the registered passes); a test may add
  // passes of its own.
  absl::Span<const PassInfo> passes = {};
};

struct SpmdCheck {
  // The module after lowering (and `pipeline`).
  std::unique_ptr<Module> module;
  // It printed: filled by the overloads that take text (tests read it), not by the one
  // that takes a module.
  std::string lowered;
  // One line per result (runtime::FormatComparison).
  std::string report;
  bool pass = false;
  // The lowered run's per-op events (with record_events); they point into `module`.
  std::vector<runtime::OpEvent> events;
};

// Runs @`function` of `module` on one device as the reference; lowers a copy of the
// module (RunDefaultSpmdPipeline, unless options.default_pipeline is false), applies
// `options.pipeline` and runs it on every device of the mesh, with the same random
// inputs (from `options.seed`); and compares every result with the default tolerance of
// its element type. `module` is not changed. Errors (lowering, passes, verification,
// execution) come back as a status, with the line and column in the text `module` was
// read from where there is one.
absl::StatusOr<SpmdCheck> CheckSpmd(const Module& module, absl::string_view function,
                                    const SpmdCheckOptions& options);

// The same for a program given as text (named "<text>" in parse errors), with
// SpmdCheck::lowered filled.
absl::StatusOr<SpmdCheck> CheckSpmd(absl::string_view text, absl::string_view function,
                                    const SpmdCheckOptions& options);

// CheckSpmd of text with the default pipeline only.
absl::StatusOr<SpmdCheck> CheckPartitioned(absl::string_view text, absl::string_view function,
                                           uint64_t seed = 0, bool propagate = true);

// CheckSpmd of text with kPartitionPipeline only: one collective per reshard, as
// lower-to-spmd emits them, for tests that count or match the partitioner's collectives.
absl::StatusOr<SpmdCheck> CheckPartitionOnly(absl::string_view text, absl::string_view function,
                                             uint64_t seed = 0, bool propagate = true);

}  // namespace commir::testing

#endif  // COMMIR_TESTING_SPMD_CHECK_H_
