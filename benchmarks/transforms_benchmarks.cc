// CSE and DCE on generated N-op programs with duplicate and dead ops
// (GenerateCseDceMix: per group of five ops one duplicate and two dead ops),
// N = 1k, 10k, 100k, 1M.
//
// BM_Pass/<pass>: every pass of the pipeline on N = 1k, 10k and 100k ops of the
// sharded matmul programs: canonicalize, cse, dce, propagate-sharding and
// lower-to-spmd on the global chain (GenerateShardedMatmulChain; lower-to-spmd after
// propagate-sharding, outside the timing), the collective-matmul schedules and both
// reports on its lowered form (GenerateGatherMatmulPairs), ring-attention and
// ulysses-attention on GenerateGatheredAttentionChain. items_per_second is input
// ops per second: time per op is its inverse, so a pass that scales linearly shows the
// same rate at every size.
//
// Each iteration transforms a freshly parsed module; parsing it and destroying the
// result are excluded from the timing (PauseTiming). Reported: items_per_second (input
// ops/s), bytes_per_second (input text bytes/s), bytes_per_op / allocs_per_op (heap the
// pass needs, see bench_common.h). Every iteration checks the number of erased ops, and
// the first run checks that the result still verifies.
#include <benchmark/benchmark.h>

#include <functional>
#include <map>
#include <utility>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmarks/bench_common.h"
#include "commir/ir.h"
#include "commir/verifier.h"
#include "transforms/canonicalize.h"
#include "transforms/cse.h"
#include "transforms/dce.h"
#include "transforms/schedules/pipeline_collective_matmul.h"
#include "transforms/schedules/ring_attention.h"
#include "transforms/schedules/ring_collective_matmul.h"
#include "transforms/schedules/schedule_report.h"
#include "transforms/schedules/ulysses_attention.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"

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

// ---- Every pass on the sharded matmul programs ----------------------------------------

enum class MatmulProgram { kGlobalChain, kLoweredPairs, kAttentionChain };

// One generated text per (program, size), kept for the whole run (three sizes each).
const GeneratedProgram& MatmulProgramText(MatmulProgram which, int64_t num_ops) {
  static auto* cache = new std::map<std::pair<MatmulProgram, int64_t>, GeneratedProgram>();
  auto [it, inserted] = cache->try_emplace({which, num_ops});
  if (inserted) {
    switch (which) {
      case MatmulProgram::kGlobalChain:
        it->second = GenerateShardedMatmulChain(num_ops);
        break;
      case MatmulProgram::kLoweredPairs:
        it->second = GenerateGatherMatmulPairs(num_ops);
        break;
      case MatmulProgram::kAttentionChain:
        it->second = GenerateGatheredAttentionChain(num_ops);
        break;
    }
  }
  return it->second;
}

struct PassCase {
  MatmulProgram program;
  // Runs before the timed pass, on each fresh parse (may be empty).
  std::function<absl::Status(Module&)> prepare;
  std::function<absl::Status(Module&)> pass;
};

void BM_Pass(benchmark::State& state, const PassCase& c) {
  const int64_t n = state.range(0);
  const GeneratedProgram& program = MatmulProgramText(c.program, n);
  auto fresh = [&]() -> std::unique_ptr<Module> {
    std::unique_ptr<Module> module = ParseChecked(state, program.text);
    if (module == nullptr) return nullptr;
    if (c.prepare) {
      if (absl::Status s = c.prepare(*module); !s.ok()) {
        state.SkipWithError(std::string(s.message()).c_str());
        return nullptr;
      }
    }
    return module;
  };
  std::unique_ptr<Module> module;
  for (auto _ : state) {
    state.PauseTiming();
    module = fresh();
    if (module == nullptr) break;
    state.ResumeTiming();
    absl::Status s = c.pass(*module);
    state.PauseTiming();
    if (!s.ok()) {
      state.SkipWithError(std::string(s.message()).c_str());
      break;
    }
    module.reset();
    state.ResumeTiming();
  }
  // Correctness once (outside the timing): the result verifies.
  if (module == nullptr && !state.error_occurred()) {
    module = fresh();
    if (module != nullptr && c.pass(*module).ok()) {
      if (absl::Status s = VerifyModule(*module); !s.ok()) {
        state.SkipWithError(std::string(s.message().substr(0, 1000)).c_str());
      }
    }
  }
  SetThroughput(state, n, static_cast<int64_t>(program.text.size()));
}

absl::Status Ok(int64_t) { return absl::OkStatus(); }

absl::Status PropagateAll(Module& m) { return sharding::PropagateSharding(m); }

const PassCase kCanonicalize{MatmulProgram::kGlobalChain, nullptr,
                             [](Module& m) { return Ok(Canonicalize(m)); }};
const PassCase kCse{MatmulProgram::kGlobalChain, nullptr,
                    [](Module& m) { return Ok(EliminateCommonSubexpressions(m)); }};
const PassCase kDce{MatmulProgram::kGlobalChain, nullptr,
                    [](Module& m) { return Ok(EliminateDeadCode(m).ops_erased); }};
const PassCase kPropagate{MatmulProgram::kGlobalChain, nullptr, PropagateAll};
const PassCase kLower{MatmulProgram::kGlobalChain, PropagateAll,
                      [](Module& m) { return sharding::LowerToSpmd(m); }};
const PassCase kPipeline{MatmulProgram::kLoweredPairs, nullptr, [](Module& m) {
                           return schedules::PipelineCollectiveMatmul(m, 4, 2, nullptr).status();
                         }};
const PassCase kRingUni{MatmulProgram::kLoweredPairs, nullptr, [](Module& m) {
                          return schedules::RingCollectiveMatmul(m, schedules::RingDirection::kUni)
                              .status();
                        }};
const PassCase kRingBi{MatmulProgram::kLoweredPairs, nullptr, [](Module& m) {
                         return schedules::RingCollectiveMatmul(m, schedules::RingDirection::kBi)
                             .status();
                       }};
const PassCase kCommReport{MatmulProgram::kLoweredPairs, nullptr, [](Module& m) {
                             benchmark::DoNotOptimize(sharding::FormatCommReport(m));
                             return absl::OkStatus();
                           }};
const PassCase kScheduleReport{MatmulProgram::kLoweredPairs,
                               [](Module& m) {
                                 return schedules::RingCollectiveMatmul(
                                            m, schedules::RingDirection::kBi)
                                     .status();
                               },
                               [](Module& m) {
                                 benchmark::DoNotOptimize(schedules::FormatScheduleReport(m));
                                 return absl::OkStatus();
                               }};

const PassCase kRingAttention{MatmulProgram::kAttentionChain, nullptr, [](Module& m) {
                                return schedules::RingAttention(m, /*zigzag=*/false);
                              }};
const PassCase kUlyssesAttention{MatmulProgram::kAttentionChain, nullptr,
                                 [](Module& m) { return schedules::UlyssesAttention(m); }};

void PassSizes(benchmark::internal::Benchmark* b) {
  b->ArgName("ops");
  for (int64_t n : {1000, 10000, 100000}) b->Arg(n);
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK_CAPTURE(BM_Pass, canonicalize, kCanonicalize)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, cse, kCse)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, dce, kDce)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, propagate_sharding, kPropagate)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, lower_to_spmd, kLower)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, pipeline_collective_matmul, kPipeline)
    ->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, ring_collective_matmul_uni, kRingUni)
    ->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, ring_collective_matmul_bi, kRingBi)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, ring_attention, kRingAttention)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, ulysses_attention, kUlyssesAttention)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, comm_report, kCommReport)->Apply(PassSizes);
BENCHMARK_CAPTURE(BM_Pass, schedule_report_after_ring_bi, kScheduleReport)
    ->Apply(PassSizes);

}  // namespace
}  // namespace commir::bench
