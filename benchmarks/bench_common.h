// Shared pieces of the CommIR benchmarks: generated inputs cached across the repeated
// calls Google Benchmark makes to one benchmark function, parsing with checks, and the
// throughput and memory counters every benchmark reports.
#ifndef COMMIR_BENCHMARKS_BENCH_COMMON_H_
#define COMMIR_BENCHMARKS_BENCH_COMMON_H_

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "benchmarks/heap_meter.h"
#include "benchmarks/program_generator.h"
#include "commir/ir.h"

namespace commir::bench {

enum class ProgramKind { kElementwiseChain, kCseDceMix };

// The sizes every benchmark runs at (ops per program); registered as `/ops:N`.
void ApplySizes(benchmark::internal::Benchmark* b);

// The generated program of `kind` with `num_ops` ops. One program is cached (the last
// one asked for), so a 1M-op text is generated once per benchmark, not once per call.
const GeneratedProgram& Program(ProgramKind kind, int64_t num_ops);

// Parses (and verifies) `text`; null after reporting the diagnostics through
// state.SkipWithError.
std::unique_ptr<Module> ParseChecked(benchmark::State& state, const std::string& text,
                                     bool verify = true);

// The parsed, verified module of Program(kind, num_ops), cached like Program. Null
// after SkipWithError if the program does not parse.
Module* CachedModule(benchmark::State& state, ProgramKind kind, int64_t num_ops);

// Number of ops in `module` (all functions, nested regions, terminators included).
int64_t CountOps(const Module& module);

// Sets items/s (ops) and bytes/s (`bytes_per_iteration`, usually the program text).
void SetThroughput(benchmark::State& state, int64_t num_ops, int64_t bytes_per_iteration);

// Runs `stage` once under a HeapMeter (the first time this `key` is seen; the result
// is cached) and reports, per op:
//   bytes_per_op   the peak heap above the starting point while the stage runs
//                  (everything it needs at once: temporaries and its result)
//   allocs_per_op  the number of heap allocations
// plus, when `report_retained` is set,
//   ir_bytes_per_op   the heap still held when the stage returns (for a parse: the
//                     module the stage built; `stage` must keep it alive until then).
// `prepare`, if given, runs first, outside the measurement (e.g. parsing the module a
// pass will transform). Nothing is reported where the hooks are unavailable (sanitizer
// builds).
void ReportMemory(benchmark::State& state, const std::string& key, int64_t num_ops,
                  const std::function<void()>& stage, bool report_retained = false,
                  const std::function<void()>& prepare = nullptr);

}  // namespace commir::bench

#endif  // COMMIR_BENCHMARKS_BENCH_COMMON_H_
