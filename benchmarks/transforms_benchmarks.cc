// CSE and DCE on generated N-op programs with duplicate and dead ops
// (GenerateCseDceMix: per group of five ops one duplicate and two dead ops),
// N = 1k, 10k, 100k, 1M.
//
// Each iteration transforms a freshly parsed module; parsing it and destroying the
// result are excluded from the timing (PauseTiming). Reported: items_per_second (input
// ops/s), bytes_per_second (input text bytes/s), bytes_per_op / allocs_per_op (heap the
// pass needs, see bench_common.h). Every iteration checks the number of erased ops, and
// the first run checks that the result still verifies.
#include <benchmark/benchmark.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmarks/bench_common.h"
#include "commir/ir.h"
#include "commir/verifier.h"
#include "transforms/cse.h"
#include "transforms/dce.h"

namespace commir::bench {
namespace {

constexpr ProgramKind kMix = ProgramKind::kCseDceMix;

// Runs `pass` (returning the number of ops it erased) over fresh parses of the mix
// program; `check` says whether that number is right.
template <typename PassFn, typename CheckFn>
void RunPassBenchmark(benchmark::State& state, const char* key, PassFn pass, CheckFn check,
                      const char* expectation) {
  const int64_t n = state.range(0);
  const GeneratedProgram& program = Program(kMix, n);
  std::unique_ptr<Module> module;
  {
    // Correctness once: the pass erases what it should and the result verifies.
    module = ParseChecked(state, program.text);
    if (module == nullptr) return;
    int64_t erased = pass(*module);
    if (!check(erased, program)) {
      state.SkipWithError(absl::StrCat(key, " erased ", erased, " ops; expected ", expectation)
                              .c_str());
      return;
    }
    if (absl::Status s = VerifyModule(*module); !s.ok()) {
      state.SkipWithError(absl::StrCat("the module does not verify after ", key, ": ",
                                       s.message().substr(0, 1000))
                              .c_str());
      return;
    }
    module.reset();
  }
  ReportMemory(
      state, key, n, [&] { benchmark::DoNotOptimize(pass(*module)); },
      /*report_retained=*/false, [&] { module = ParseChecked(state, program.text); });
  module.reset();
  for (auto _ : state) {
    state.PauseTiming();
    module = ParseChecked(state, program.text);
    if (module == nullptr) break;
    state.ResumeTiming();
    int64_t erased = pass(*module);
    state.PauseTiming();
    if (!check(erased, program)) {
      state.SkipWithError(absl::StrCat(key, " erased ", erased, " ops; expected ", expectation)
                              .c_str());
      break;
    }
    module.reset();
    state.ResumeTiming();
  }
  SetThroughput(state, n, static_cast<int64_t>(program.text.size()));
}

void BM_CSE(benchmark::State& state) {
  RunPassBenchmark(
      state, "cse", [](Module& m) { return EliminateCommonSubexpressions(m); },
      [](int64_t erased, const GeneratedProgram& p) { return erased >= p.num_duplicate_ops; },
      "at least the generated duplicates (N/5)");
}
BENCHMARK(BM_CSE)->Apply(ApplySizes);

void BM_DCE(benchmark::State& state) {
  RunPassBenchmark(
      state, "dce", [](Module& m) { return EliminateDeadCode(m).ops_erased; },
      [](int64_t erased, const GeneratedProgram& p) { return erased == p.num_dead_ops; },
      "exactly the generated dead ops (2N/5)");
}
BENCHMARK(BM_DCE)->Apply(ApplySizes);

}  // namespace
}  // namespace commir::bench
