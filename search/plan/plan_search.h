// The whole-model plan search: every way to split a model's training over N
// GPUs that Megatron-LM can run, costed by plan_cost.h, the plans that do not fit in HBM
// dropped and counted, the rest ranked by iteration time.
//
// The space: tp x cp x pp x dp = GPUs with tp within a node and dividing the heads and the
// FFN (sequence parallelism always on with tp > 1, as Megatron-LM advises), cp up to
// max_context_parallel, interleaving v (dividing the layers per stage), micro-batches of
// 1, 2, 4, ... up to max_micro_batch sequences, ZeRO 0..3 (3 only without pipelining, as
// Megatron-LM runs it as FSDP2; 1..3 only when dp x cp > 1, where they shard anything),
// recomputation none, selective, full chosen per pipeline rank, and with pp > 1 (v = 1) any
// split of the layers over the ranks: per (group, ZeRO stage) the fastest composition,
// found exactly by stage_split.h (which also lets pp not divide the layers).
//
// Why it is fast: a plan's layer costs depend only on (tp, cp, sp, micro-batch), so the
// distinct layer programs are collected first and measured once each (on worker
// threads); everything after is arithmetic. Two prunes on top, both exact:
//  * the recomputation is chosen per rank, not enumerated (3^pp ways): a rank's memory,
//    time and data-parallel exposure depend on its own choice only, so the lightest that
//    fits on each rank is best (heavier adds d per micro-batch to a rank, at least d / v
//    to the iteration, and hides less than d / v more data-parallel time: see
//    ChooseRecomputation), and when recomputing nothing fits on every rank the heavier
//    ones are never costed (dominance). A plan is dropped only when some rank fits under
//    none;
//  * a bound: every plan of a (tp, cp, pp, dp, micro-batch) group takes at least
//    m x (layers / pp) x (F + B) of one layer (the slowest rank's steady state: some rank
//    holds at least layers / pp layers, whatever the split), so a group
//    whose bound is no faster than the top-K-th plan found is skipped.
//
// The floor: the standard settings an expert launches, as Megatron-LM's and NeMo's
// published recipes choose them (the configurations in the calibration notes' "Whole
// models": NeMo 24.07's GPT-3 175B TP4 PP8 VP6 MBS 1 and, on 512 GPUs, MBS 2; Llama 2 70B
// TP4 PP4 VP20; Llama 3 70B TP4 PP4 CP2 VP5 at sequence 8192; Llama 3 8B CP2; Llama 3.1
// 405B TP8 PP8 CP2 VP8; MLPerf v4.0's GPT-3 TP4 PP8 interleave 4 MBS 2): tp in 1, 2, 4, 8
// within a node, every pp, cp = 1 (and 2 from sequence 8192, as NeMo's Llama 3 recipes),
// micro-batch 1 or 2, interleaving off or at 1 to 4 layers per virtual stage (the recipes
// run 1 to 4), Megatron-LM's distributed optimizer when dp x cp > 1 (every recipe uses
// it), an even split, and the lightest recomputation that fits, one for every rank as
// Megatron-LM takes it (their per-rank variant is ranked too when strictly faster). They
// are costed first and seed the ranking, so the search never reports a best plan slower
// than the best standard setting, and the report's gain is over the best of them.
#ifndef COMMIR_SEARCH_PLAN_PLAN_SEARCH_H_
#define COMMIR_SEARCH_PLAN_PLAN_SEARCH_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "search/plan/layer_cost.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "search/plan/plan_cost.h"

namespace commir::search::plan {

struct PlanSearchOptions {
  int64_t gpus = 0;
  int top = 10;                    // plans to report (at least 1)
  int threads = 0;                 // layer-measuring workers; 0: the hardware's cores
  int64_t max_micro_batch = 8;     // powers of two up to this
  // > 0: this micro-batch only (standard settings included), as for a model written as
  // CommIR for one micro-batch.
  int64_t only_micro_batch = 0;
  int64_t max_virtual_stages = 8;  // interleaving v up to this
  int64_t max_context_parallel = 8;
  PlanCostOptions cost;
};

struct RankedPlan {
  ParallelPlan plan;
  PlanCost cost;
  bool standard = false;  // one of Megatron-LM's standard settings
};

struct PlanSearchResult {
  std::vector<RankedPlan> ranked;           // fastest first, every one fits
  std::optional<RankedPlan> best_standard;  // the fastest standard setting that fits
  int64_t standard_tried = 0;               // standard settings costed
  // Counted in plan x recomputation costings: each plan is costed with one recomputation
  // for every rank (none, selective, full) and then with its per-rank mix when mixed.
  int64_t costed = 0;                       // costings (standard ones included)
  int64_t dropped_memory = 0;               // uniform costings that do not fit in HBM
  int64_t pruned_dominated = 0;             // heavier uniform recomputations never costed
  int64_t pruned_bound = 0;                 // plans of groups the time bound skipped
  int64_t layer_programs = 0;               // distinct layer programs measured
  double seconds = 0;
};

// Searches on the layer cache's hardware and GPUs per node. Errors on a bad model, fewer
// than one GPU, top < 1, or a layer program that cannot be measured.
absl::StatusOr<PlanSearchResult> SearchPlans(const ModelSpec& model,
                                             const PlanSearchOptions& options,
                                             LayerCostCache& layers);

// The recipes' sequence length from which they add context parallelism of 2, and the
// most layers per virtual pipeline stage they interleave with (see above).
inline constexpr int64_t kRecipeContextParallelSequence = 8192;
inline constexpr int64_t kRecipeMaxLayersPerVirtualStage = 4;

// The standard settings for the model on `gpus` GPUs (see above), with no recomputation
// (the search tries heavier ones when they do not fit), at the recipes' micro-batches 1
// and 2, or at `micro_batch` alone when it is > 0.
std::vector<ParallelPlan> StandardPlans(const ModelSpec& model, int64_t gpus,
                                        int64_t gpus_per_node, int64_t micro_batch = 0);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PLAN_SEARCH_H_
