// Every program of //benchmarks:cuda_benchmarks parses and verifies, and runs on the cpu
// backend with the result its closed form or global reference gives: a benchmark program
// broken by a language change fails here, on any machine, not on a GPU run.
#include "benchmarks/cuda_benchmark_programs.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backend_cpu/cpu_backend.h"
#include "commir/ir.h"
#include "gtest/gtest.h"
#include "parser/parser.h"
#include "runtime/compare.h"
#include "runtime/global_run.h"
#include "runtime/random_inputs.h"
#include "runtime/tensor.h"

namespace commir::bench {
namespace {

using runtime::Tensor;

std::unique_ptr<Module> ParseOrFail(const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "benchmark");
  EXPECT_TRUE(module.ok()) << module.status().message() << "\n" << text;
  return module.ok() ? *std::move(module) : nullptr;
}

std::vector<Tensor> RunOnCpu(const Module& module, const std::vector<Tensor>& inputs) {
  cpu::CpuBackend backend;
  absl::StatusOr<std::vector<Tensor>> results =
      runtime::RunWithGlobalTensors(*module.functions()[0], backend, inputs);
  EXPECT_TRUE(results.ok()) << results.status();
  return results.ok() ? *std::move(results) : std::vector<Tensor>{};
}

TEST(CudaBenchmarkProgramsTest, GemmParses) {
  // The benchmark's largest shape parses; a small one computes a known product.
  ASSERT_NE(ParseOrFail(GemmProgram(8192, 14336, 4096)), nullptr);
}

TEST(CudaBenchmarkProgramsTest, ExecutorPerOpComputesItsRecurrence) {
  for (int64_t trips : {250, 2500}) {  // the benchmark's 1000 and 10000 ops
    ASSERT_NE(ParseOrFail(ExecutorPerOpProgram(trips)), nullptr);
  }
  std::unique_ptr<Module> module = ParseOrFail(ExecutorPerOpProgram(3));
  ASSERT_NE(module, nullptr);
  Tensor x = runtime::RandomGlobalTensor(0, 0, ElementType::kF32, {256});
  std::vector<Tensor> out = RunOnCpu(*module, {x});
  ASSERT_EQ(out.size(), 1u);
  // v <- tanh(v/2 + 1/4) - v/2, three times, in double: f32 rounding stays within 1e-6.
  const float* got = out[0].data<float>();
  const float* in = x.data<float>();
  for (int i = 0; i < 256; ++i) {
    double v = in[i];
    for (int t = 0; t < 3; ++t) v = std::tanh(v * 0.5 + 0.25) - v * 0.5;
    EXPECT_NEAR(got[i], v, 1e-6) << "element " << i;
  }
}

TEST(CudaBenchmarkProgramsTest, AgGemmProgramsParseAtBenchmarkSize) {
  AgGemmShape shape;  // the benchmark's 8192 x 4096 x 4096 on 4 devices, bf16
  EXPECT_NE(ParseOrFail(PlainAgGemmProgram(shape)), nullptr);
  EXPECT_NE(ParseOrFail(PipelinedAgGemmProgram(shape)), nullptr);
}

TEST(CudaBenchmarkProgramsTest, PlainAndPipelinedAgGemmMatchTheGlobalMatmul) {
  AgGemmShape shape;
  shape.m = 64;
  shape.k = 24;
  shape.n = 16;
  shape.devices = 4;
  shape.type = "f32";
  std::unique_ptr<Module> global = ParseOrFail(GlobalAgGemmProgram(shape));
  ASSERT_NE(global, nullptr);
  std::vector<Tensor> inputs = {
      runtime::RandomGlobalTensor(1, 0, ElementType::kF32, {shape.m, shape.k}),
      runtime::RandomGlobalTensor(1, 1, ElementType::kF32, {shape.k, shape.n})};
  std::vector<Tensor> expected = RunOnCpu(*global, inputs);
  ASSERT_EQ(expected.size(), 1u);
  for (const std::string& text : {PlainAgGemmProgram(shape), PipelinedAgGemmProgram(shape)}) {
    std::unique_ptr<Module> module = ParseOrFail(text);
    ASSERT_NE(module, nullptr);
    std::vector<Tensor> got = RunOnCpu(*module, inputs);
    ASSERT_EQ(got.size(), 1u);
    runtime::Comparison c = runtime::CompareWithReference("c", got[0], expected[0], 1e-6);
    EXPECT_TRUE(c.pass) << runtime::FormatComparison(c) << "\n" << text;
  }
}

}  // namespace
}  // namespace commir::bench
