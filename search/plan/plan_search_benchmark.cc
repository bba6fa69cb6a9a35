// Seconds per whole-model plan search (issue 15: GPT-3 1.3B on 4 GPUs in under a second,
// a 1,024-layer model in under ten, Llama-3 70B on 1,024 GPUs in under ten). Each
// iteration is a whole search from a cold layer cache: the distinct layer programs
// generated, partitioned and predicted by the sim, then every plan costed and ranked.
// Counters: plans costed, layer programs measured, plans dropped for memory.
//   bazel run -c opt //search/plan:plan_search_benchmark
#include <string>

#include "benchmark/benchmark.h"
#include "search/plan/layer_cost.h"
#include "search/plan/model_spec.h"
#include "search/plan/plan_search.h"
#include "sim/hardware.h"

namespace commir::search::plan {
namespace {

void RunPlanSearch(benchmark::State& state, const std::string& model_text) {
  absl::StatusOr<ModelSpec> model = ParseModelSpec(model_text);
  if (!model.ok()) {
    state.SkipWithError(std::string(model.status().message()).c_str());
    return;
  }
  LayerCostOptions layer_options;
  layer_options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  PlanSearchOptions options;
  options.gpus = state.range(0);
  double costed = 0, programs = 0, dropped = 0;
  for (auto _ : state) {
    LayerCostCache layers(layer_options);  // cold: the measurements are part of the search
    absl::StatusOr<PlanSearchResult> result = SearchPlans(*model, options, layers);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    costed += result->costed;
    programs += result->layer_programs;
    dropped += result->dropped_memory;
    benchmark::DoNotOptimize(result->ranked.data());
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plans"] = costed / n;
  state.counters["layer_programs"] = programs / n;
  state.counters["dropped"] = dropped / n;
}

// Aceso's (EuroSys'24) cases: GPT-3 1.3B on 4 GPUs, a 1,024-layer GPT (its hidden size,
// 1.3B's, about 52B parameters) on 64 GPUs; and Llama-3 70B on 1,024.
void BM_PlanSearchGpt3_1_3b(benchmark::State& state) { RunPlanSearch(state, "gpt3-1.3b"); }
void BM_PlanSearchGpt1024Layers(benchmark::State& state) {
  RunPlanSearch(state, "gpt3-1.3b,layers=1024,global_batch=1024");
}
void BM_PlanSearchLlama3_70b(benchmark::State& state) { RunPlanSearch(state, "llama3-70b"); }
BENCHMARK(BM_PlanSearchGpt3_1_3b)->Arg(4)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanSearchGpt1024Layers)->Arg(64)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanSearchLlama3_70b)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace commir::search::plan
