// How long one answer of the performance model takes. The schedule search asks for the
// time of every op and collective of every candidate program, millions of times, so each
// call must cost well under a microsecond.
//   bazel run //sim:model_benchmark
#include <memory>
#include <vector>

#include "benchmark/benchmark.h"
#include "parser/parser.h"
#include "sim/collective_op.h"
#include "sim/collective_time.h"
#include "sim/hardware.h"
#include "sim/op_time.h"
#include "sim/placement.h"

namespace commir::sim {
namespace {

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }

// One op of a parsed module, kept alive for the benchmark's duration.
struct ParsedOp {
  std::unique_ptr<Module> module;
  Function* function = nullptr;
  const Operation* op = nullptr;
};

ParsedOp Parse(const char* source) {
  ParsedOp parsed;
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "bench.commir");
  if (!module.ok()) return parsed;
  parsed.module = std::move(*module);
  parsed.function = parsed.module->functions().front();
  parsed.op = *parsed.function->body()->begin();
  return parsed;
}

void RunOpTime(benchmark::State& state, const char* source) {
  ParsedOp parsed = Parse(source);
  if (parsed.op == nullptr) {
    state.SkipWithError("the benchmark program does not parse");
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<double> t = OpTime(H100(), *parsed.op, *parsed.function);
    benchmark::DoNotOptimize(t);
  }
}

void BM_OpTimeMatmulFromIr(benchmark::State& state) {
  RunOpTime(state, R"(mesh @m(tp=8)
spmd func @f(%a: bf16[4096, 8192], %b: bf16[8192, 3584]) -> bf16[4096, 3584] {
  %c = matmul(%a, %b)
  return %c
})");
}
BENCHMARK(BM_OpTimeMatmulFromIr);

void BM_OpTimeAttentionFromIr(benchmark::State& state) {
  RunOpTime(state, R"(func @f(%q: bf16[1, 8, 8192, 128], %k: bf16[1, 1, 8192, 128], %v: bf16[1, 1, 8192, 128]) -> bf16[1, 8, 8192, 128] {
  %o = attention(%q, %k, %v) {causal}
  return %o
})");
}
BENCHMARK(BM_OpTimeAttentionFromIr);

void BM_OpTimeAddFromIr(benchmark::State& state) {
  RunOpTime(state, R"(func @f(%a: bf16[8192, 8192], %b: bf16[8192, 8192]) -> bf16[8192, 8192] {
  %c = add(%a, %b)
  return %c
})");
}
BENCHMARK(BM_OpTimeAddFromIr);

// The formula alone, for a caller that already holds the op's cost and shape.
void BM_GemmTime(benchmark::State& state) {
  const HardwareSpec& hw = H100();
  int64_t m = 4096;
  for (auto _ : state) {
    benchmark::DoNotOptimize(m);
    GemmShape shape{.m = m, .n = 3584, .k = 8192, .operand_bytes = 2.0 * (m + 3584) * 8192};
    absl::StatusOr<double> t = GemmTime(hw, shape);
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_GemmTime);

void BM_CollectiveTime(benchmark::State& state) {
  const HardwareSpec& hw = H100();
  const GroupPlacement group = state.range(0) == 0 ? SingleNodeGroup(8) : GroupPlacement{64, 8, 8};
  double bytes = 64 << 20;
  for (auto _ : state) {
    benchmark::DoNotOptimize(bytes);
    absl::StatusOr<CollectiveEstimate> e =
        EstimateCollective(hw, CollectiveKind::kAllGather, bytes, group);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_CollectiveTime)->Arg(0)->Arg(1)->ArgName("spans_nodes");

// A collective of the IR, from one device: group from the mesh, placement, then the formula.
void BM_EstimateCollectiveOpFromIr(benchmark::State& state) {
  ParsedOp parsed = Parse(R"(mesh @m(dp=8, tp=8)
spmd func @f(%a: bf16[512, 8192]) -> bf16[4096, 8192] {
  %g = all_gather(%a) {axis = tp, dim = 0} : bf16[4096, 8192]
  return %g
})");
  if (parsed.op == nullptr) {
    state.SkipWithError("the benchmark program does not parse");
    return;
  }
  for (auto _ : state) {
    absl::StatusOr<CollectiveEstimate> e = EstimateCollectiveOp(H100(), *parsed.op, *parsed.function, 13, 8);
    benchmark::DoNotOptimize(e);
  }
}
BENCHMARK(BM_EstimateCollectiveOpFromIr);

void BM_PlaceGroup(benchmark::State& state) {
  std::vector<int64_t> group;
  for (int64_t d = 0; d < state.range(0); ++d) group.push_back(d * 8 + 3);  // a dp group
  for (auto _ : state) {
    absl::StatusOr<GroupPlacement> p = PlaceGroup(group, 8);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(BM_PlaceGroup)->Arg(8)->Arg(64);

}  // namespace
}  // namespace commir::sim
