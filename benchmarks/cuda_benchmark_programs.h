// The CommIR programs that //benchmarks:cuda_benchmarks runs, as text. Plain C++ (no
// CUDA) so that cuda_benchmark_programs_test parses, verifies and runs every one of them
// on the cpu backend where no GPU is present: a benchmark program that does not parse
// fails the build's tests, not a GPU run.
#ifndef COMMIR_BENCHMARKS_CUDA_BENCHMARK_PROGRAMS_H_
#define COMMIR_BENCHMARKS_CUDA_BENCHMARK_PROGRAMS_H_

#include <cstdint>
#include <string>

namespace commir::bench {

// BM_GemmExecutor: c[m, n] = a[m, k] b[k, n] in bf16, global.
std::string GemmProgram(int64_t m, int64_t n, int64_t k);

// BM_ExecutorPerOp: a loop of `trips` iterations of four elementwise ops on f32[256]
// (number literals as operands). `for` is spmd only, so it is a spmd function without a
// mesh (one device).
std::string ExecutorPerOpProgram(int64_t trips);

// BM_AgGemm's all_gather + GEMM on a 1-D mesh tp=devices: a[m@tp, k] gathered, times
// b[k, n@tp]. Element type by name ("bf16", "f32").
struct AgGemmShape {
  int64_t m = 8192, k = 4096, n = 4096, devices = 4;
  std::string type = "bf16";
};
// all_gather then one matmul.
std::string PlainAgGemmProgram(const AgGemmShape& shape);
// The ring (ag_matmul.commir's spmd form): each step multiplies the block it holds while
// the next block arrives by shift on stream 1.
std::string PipelinedAgGemmProgram(const AgGemmShape& shape);
// The global program both compute: c[m, n] = a[m, k] b[k, n] (the tests' reference).
std::string GlobalAgGemmProgram(const AgGemmShape& shape);

}  // namespace commir::bench

#endif  // COMMIR_BENCHMARKS_CUDA_BENCHMARK_PROGRAMS_H_
