// Candidates searched per second (target: an attention layer's or an MLP's whole space
// on 8 devices in under a second, on 64 in under ten). Each iteration is a whole search
// without verification: meshes, layouts, partitioning, schedules (on in-memory copies), dedupe,
// prediction and ranking. Counters: candidates (distinct programs predicted) and
// schedules tried per second.
//   bazel run -c opt //search:search_benchmark
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "parser/parser.h"
#include "search/search.h"
#include "sim/hardware.h"

namespace commir::search {
namespace {

// Causal GQA attention at long context: 32 query heads over 8 kv heads, head dim 128.
std::string Attention(int64_t sequence) {
  return absl::StrCat(R"(mesh @m(d=1)
func @attention(%q: bf16[1, 32, )", sequence, R"(, 128], %k: bf16[1, 8, )", sequence,
                      R"(, 128], %v: bf16[1, 8, )", sequence, R"(, 128]) -> bf16[1, 32, )", sequence,
                      R"(, 128] {
  %o = attention(%q, %k, %v) {causal}
  return %o
}
)");
}

// The Megatron MLP: hidden 4096, FFN 16384.
std::string Mlp(int64_t tokens) {
  return absl::StrCat(R"(mesh @m(d=1)
func @mlp(%x: bf16[)", tokens, R"(, 4096], %w1: bf16[4096, 16384], %w2: bf16[16384, 4096]) -> bf16[)",
                      tokens, R"(, 4096] {
  %u = matmul(%x, %w1) : bf16[)", tokens, R"(, 16384]
  %a = gelu(%u)
  %y = matmul(%a, %w2) : bf16[)", tokens, R"(, 4096]
  return %y
}
)");
}

void RunSearch(benchmark::State& state, const std::string& text) {
  absl::StatusOr<std::unique_ptr<Module>> module = ParseModuleOrError(text, "bench.commir");
  if (!module.ok()) {
    state.SkipWithError(std::string(module.status().message()).c_str());
    return;
  }
  SearchOptions options;
  options.devices = state.range(0);
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.verify = VerifyMode::kNone;
  int64_t candidates = 0, schedules = 0;
  for (auto _ : state) {
    absl::StatusOr<SearchResult> result = Search(**module, options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    candidates += result->stats.candidates;
    schedules += result->stats.schedules_tried;
    benchmark::DoNotOptimize(result->ranked.data());
  }
  state.counters["candidates/s"] = benchmark::Counter(static_cast<double>(candidates), benchmark::Counter::kIsRate);
  state.counters["schedules/s"] = benchmark::Counter(static_cast<double>(schedules), benchmark::Counter::kIsRate);
  state.counters["candidates"] = static_cast<double>(candidates) / static_cast<double>(state.iterations());
}

void BM_SearchAttention(benchmark::State& state) { RunSearch(state, Attention(32768)); }
void BM_SearchMlp(benchmark::State& state) { RunSearch(state, Mlp(16384)); }

BENCHMARK(BM_SearchAttention)->Arg(8)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SearchMlp)->Arg(8)->Arg(64)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace commir::search
