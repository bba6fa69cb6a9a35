// Propagation + lowering time of a generated L-layer transformer (the shared example's
// pre-norm block with Megatron tensor parallelism and a sequence-parallel residual
// stream, repeated L times with its own weights), for L = 12, 24, 48, 96. Each
// benchmark reports the time per layer (`us_per_layer`); a constant value across L
// shows that the passes are linear in the program size.
//
//   bazel run -c opt //transforms/sharding:partitioner_benchmark
//
// Parsing is outside the timed region: every iteration parses a fresh module (paused),
// then times propagate-sharding and lower-to-spmd on it.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "benchmark/benchmark.h"
#include "commir/ir.h"
#include "parser/parser.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"

namespace commir::sharding {
namespace {

// One block; $ is the layer index, %in the residual stream entering it, %out leaving it.
constexpr char kBlock[] = R"(  %h$ = layernorm(%in, %g1_$, %b1_$) {eps = 1e-5}
  %q$ = matmul(%h$, %wq$) : f32[256, 256@tp]
  %k$ = matmul(%h$, %wk$) : f32[256, 256@tp]
  %v$ = matmul(%h$, %wv$) : f32[256, 256@tp]
  %q3_$ = reshape(%q$) : f32[256, 8@tp, 32]
  %k3_$ = reshape(%k$) : f32[256, 8@tp, 32]
  %v3_$ = reshape(%v$) : f32[256, 8@tp, 32]
  %qh$ = transpose(%q3_$) {perm = [1, 0, 2]} : f32[8@tp, 256, 32]
  %kh$ = transpose(%k3_$) {perm = [1, 0, 2]} : f32[8@tp, 256, 32]
  %vh$ = transpose(%v3_$) {perm = [1, 0, 2]} : f32[8@tp, 256, 32]
  %q4_$ = reshape(%qh$) : f32[1, 8@tp, 256, 32]
  %k4_$ = reshape(%kh$) : f32[1, 8@tp, 256, 32]
  %v4_$ = reshape(%vh$) : f32[1, 8@tp, 256, 32]
  %o4_$ = attention(%q4_$, %k4_$, %v4_$) {causal}
  %o3_$ = reshape(%o4_$) : f32[8@tp, 256, 32]
  %ot$ = transpose(%o3_$) {perm = [1, 0, 2]} : f32[256, 8@tp, 32]
  %o$ = reshape(%ot$) : f32[256, 256@tp]
  %attn$ = matmul(%o$, %wo$) : f32[256@tp, 256]
  %r$ = add(%in, %attn$)
  %h2_$ = layernorm(%r$, %g2_$, %b2_$) {eps = 1e-5}
  %u$ = matmul(%h2_$, %w1_$) : f32[256, 1024@tp]
  %a$ = gelu(%u$)
  %d$ = matmul(%a$, %w2_$) : f32[256@tp, 256]
  %out = add(%r$, %d$)
)";

constexpr char kLayerArgs[] =
    "%g1_$: f32[256], %b1_$: f32[256], %wq$: f32[256, 256@tp], %wk$: f32[256, 256@tp], "
    "%wv$: f32[256, 256@tp], %wo$: f32[256@tp, 256], %g2_$: f32[256], %b2_$: f32[256], "
    "%w1_$: f32[256, 1024@tp], %w2_$: f32[1024@tp, 256]";

std::string Transformer(int layers) {
  std::string args = "%x: f32[256@tp, 256]";
  std::string body;
  for (int l = 0; l < layers; ++l) {
    std::string index = absl::StrCat(l);
    absl::StrAppend(&args, ", ", absl::StrReplaceAll(kLayerArgs, {{"$", index}}));
    absl::StrAppend(&body, absl::StrReplaceAll(kBlock, {{"$", index},
                                                       {"%in", l == 0 ? "%x" : absl::StrCat("%y", l - 1)},
                                                       {"%out", absl::StrCat("%y", l)}}));
  }
  return absl::StrCat("mesh @m(tp=4)\n\nfunc @transformer(", args, ") -> f32[256@tp, 256] {\n",
                      body, "  return %y", layers - 1, "\n}\n");
}

double ThreadCpuMicros() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) * 1e-3;
}

void BM_PropagateAndLower(benchmark::State& state) {
  const int layers = static_cast<int>(state.range(0));
  const std::string text = Transformer(layers);
  int64_t ops = 0;
  double timed_us = 0;
  for (auto _ : state) {
    state.PauseTiming();
    absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "transformer.commir");
    if (!module.ok()) {
      state.SkipWithError(std::string(module.status().message()).c_str());
      return;
    }
    Function& function = *(*module)->functions()[0];
    ops = static_cast<int64_t>(function.body()->size());
    state.ResumeTiming();
    double start = ThreadCpuMicros();
    absl::Status propagated = PropagateSharding(function);
    absl::Status lowered = propagated.ok() ? LowerToSpmd(function) : propagated;
    timed_us += ThreadCpuMicros() - start;
    if (!lowered.ok()) {
      state.SkipWithError(std::string(lowered.message()).c_str());
      return;
    }
    state.PauseTiming();
    module->reset();  // destruction is not part of the measurement
    state.ResumeTiming();
  }
  state.counters["layers"] = layers;
  state.counters["ops"] = static_cast<double>(ops);
  // CPU time of the timed region per iteration and layer, in microseconds (CPU time, so
  // that other work on a shared machine does not blur the comparison across L).
  state.counters["us_per_layer"] =
      timed_us / static_cast<double>(std::max<int64_t>(1, state.iterations())) / layers;
}

BENCHMARK(BM_PropagateAndLower)->Arg(12)->Arg(24)->Arg(48)->Arg(96)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace commir::sharding
