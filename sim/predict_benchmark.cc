// How fast the sim backend predicts whole programs, against its target: operator-sized
// programs on 8 devices at >= 10,000 predictions per second, and an 80-layer
// Llama-70B-shaped program (sequence 8k) on 64 devices in well under a second. Parsing is
// outside the timed loop.
//   bazel run //sim:predict_benchmark
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "benchmark/benchmark.h"
#include "parser/parser.h"
#include "sim/hardware.h"
#include "sim/predict.h"

namespace commir::sim {
namespace {

// A two-chunk all-gather + GEMM on stream 1 / stream 0: the size of one operator.
constexpr char kOperatorProgram[] = R"(
mesh @m(tp=8)
spmd func @f(%a0: bf16[4096@tp, 8192], %a1: bf16[4096@tp, 8192], %b: bf16[8192, 1024]) -> (bf16[4096, 1024], bf16[4096, 1024]) {
  %g0 = all_gather(%a0) {axis = tp, dim = 0, stream = 1} : bf16[4096, 8192]
  %g1 = all_gather(%a1) {axis = tp, dim = 0, stream = 1} : bf16[4096, 8192]
  %p0 = matmul(%g0, %b) : bf16[4096, 1024]
  %p1 = matmul(%g1, %b) : bf16[4096, 1024]
  return %p0, %p1
}
)";

// `layers` Llama-70B layers (hidden 8192, 64 query and 8 kv heads of 128, ffn 28672) at
// sequence 8192 with Megatron tensor parallelism over tp=8 and a sequence-parallel
// residual, on a dp=8 x tp=8 mesh (tp inside a node). Written in per-device shapes; the
// layers share one set of weight arguments (same shapes), so weight memory counts once.
constexpr char kLayer[] = R"(  %g_$i = all_gather(%x_$i) {axis = tp, dim = 0} : bf16[8192, 8192]
  %q_$i = matmul(%g_$i, %wq) : bf16[8192, 1024]
  %k_$i = matmul(%g_$i, %wk) : bf16[8192, 128]
  %v_$i = matmul(%g_$i, %wv) : bf16[8192, 128]
  %q4_$i = reshape(%q_$i) : bf16[1, 8192, 8, 128]
  %k4_$i = reshape(%k_$i) : bf16[1, 8192, 1, 128]
  %v4_$i = reshape(%v_$i) : bf16[1, 8192, 1, 128]
  %qt_$i = transpose(%q4_$i) {perm = [0, 2, 1, 3]} : bf16[1, 8, 8192, 128]
  %kt_$i = transpose(%k4_$i) {perm = [0, 2, 1, 3]} : bf16[1, 1, 8192, 128]
  %vt_$i = transpose(%v4_$i) {perm = [0, 2, 1, 3]} : bf16[1, 1, 8192, 128]
  %o_$i = attention(%qt_$i, %kt_$i, %vt_$i) {causal} : bf16[1, 8, 8192, 128]
  %ot_$i = transpose(%o_$i) {perm = [0, 2, 1, 3]} : bf16[1, 8192, 8, 128]
  %o2_$i = reshape(%ot_$i) : bf16[8192, 1024]
  %p_$i = matmul(%o2_$i, %wo) : bf16[8192, 8192]
  %r_$i = reduce_scatter(%p_$i) {axis = tp, dim = 0} : bf16[1024, 8192]
  %h_$i = add(%x_$i, %r_$i) : bf16[1024, 8192]
  %f_$i = all_gather(%h_$i) {axis = tp, dim = 0} : bf16[8192, 8192]
  %u_$i = matmul(%f_$i, %w1) : bf16[8192, 3584]
  %a_$i = matmul(%f_$i, %w3) : bf16[8192, 3584]
  %m_$i = mul(%u_$i, %a_$i) : bf16[8192, 3584]
  %dn_$i = matmul(%m_$i, %w2) : bf16[8192, 8192]
  %s_$i = reduce_scatter(%dn_$i) {axis = tp, dim = 0} : bf16[1024, 8192]
  %x_$n = add(%h_$i, %s_$i) : bf16[1024, 8192]
)";

std::string LlamaProgram(int layers) {
  std::string text = R"(
mesh @m(dp=8, tp=8)
spmd func @llama(%x_0: bf16[1024, 8192], %wq: bf16[8192, 1024], %wk: bf16[8192, 128], %wv: bf16[8192, 128], %wo: bf16[1024, 8192], %w1: bf16[8192, 3584], %w3: bf16[8192, 3584], %w2: bf16[3584, 8192]) -> (bf16[1024, 8192]) {
)";
  for (int i = 0; i < layers; ++i) {
    absl::StrAppend(&text, absl::StrReplaceAll(kLayer, {{"$i", absl::StrCat(i)},
                                                        {"$n", absl::StrCat(i + 1)}}));
  }
  absl::StrAppend(&text, absl::StrFormat("  return %%x_%d\n}\n", layers));
  return text;
}

void RunPredict(benchmark::State& state, const std::string& source) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(source, "bench.commir");
  if (!module.ok()) {
    state.SkipWithError(std::string(module.status().message()).c_str());
    return;
  }
  const Function& function = *(*module)->functions().front();
  PredictOptions options;
  options.hardware = *FindBuiltinHardware("h100-sxm");
  double predicted_s = 0;
  for (auto _ : state) {
    absl::StatusOr<Prediction> p = Predict(function, options);
    if (!p.ok()) {
      state.SkipWithError(std::string(p.status().message()).c_str());
      return;
    }
    // DoNotOptimize on the result object, not on a double read after the loop: this
    // benchmark version read such a double back as garbage here (seen under GCC -O2).
    benchmark::DoNotOptimize(p);
    predicted_s = p->time_s;
  }
  state.SetItemsProcessed(state.iterations());  // programs predicted
  state.SetLabel(absl::StrFormat("predicted %.3f ms", predicted_s * 1e3));
}

void BM_PredictOperatorOn8Devices(benchmark::State& state) { RunPredict(state, kOperatorProgram); }
BENCHMARK(BM_PredictOperatorOn8Devices);

void BM_PredictLlama70bOn64Devices(benchmark::State& state) {
  RunPredict(state, LlamaProgram(static_cast<int>(state.range(0))));
}
BENCHMARK(BM_PredictLlama70bOn64Devices)->Arg(1)->Arg(80)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace commir::sim
