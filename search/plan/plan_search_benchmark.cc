// Seconds per whole-model plan search (targets: GPT-3 1.3B on 4 GPUs in under a second,
// a 1,024-layer model in under ten, Llama-3 70B on 1,024 GPUs in under ten). Each
// iteration is a whole search from a cold layer cache: the distinct layer programs
// generated, partitioned and predicted by the sim, then every plan costed and ranked.
// Counters: plans costed, layer programs measured, programs predicted for them (each
// layer's scheduled variants), plans dropped for memory. The second argument is the
// layer schedule mode: 0 plain collectives, 1 the schedule search (the default).
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
  layer_options.schedule = state.range(1) == 0 ? LayerSchedule::None() : LayerSchedule::Search();
  PlanSearchOptions options;
  options.gpus = state.range(0);
  double costed = 0, programs = 0, predicted = 0, dropped = 0;
  for (auto _ : state) {
    LayerCostCache layers(layer_options);  // cold: the measurements are part of the search
    absl::StatusOr<PlanSearchResult> result = SearchPlans(*model, options, layers);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    costed += result->costed;
    programs += result->layer_programs;
    predicted += static_cast<double>(layers.programs_predicted());
    dropped += result->dropped_memory;
    benchmark::DoNotOptimize(result->ranked.data());
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["plans"] = costed / n;
  state.counters["layer_programs"] = programs / n;
  state.counters["predicted"] = predicted / n;
  state.counters["dropped"] = dropped / n;
}

// Aceso's (EuroSys'24) cases: GPT-3 1.3B on 4 GPUs, a 1,024-layer GPT (its hidden size,
// 1.3B's, about 52B parameters) on 64 GPUs; and Llama-3 70B on 1,024.
void BM_PlanSearchGpt3_1_3b(benchmark::State& state) { RunPlanSearch(state, "gpt3-1.3b"); }
void BM_PlanSearchGpt1024Layers(benchmark::State& state) {
  RunPlanSearch(state, "gpt3-1.3b,layers=1024,global_batch=1024");
}
void BM_PlanSearchLlama3_70b(benchmark::State& state) { RunPlanSearch(state, "llama3-70b"); }
BENCHMARK(BM_PlanSearchGpt3_1_3b)->Args({4, 0})->Args({4, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanSearchGpt1024Layers)->Args({64, 0})->Args({64, 1})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_PlanSearchLlama3_70b)->Args({1024, 0})->Args({1024, 1})->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace commir::search::plan
