// The fastest split of a model's layers over the ranks of a 1F1B pipeline:
// any composition of the layers into pp positive counts, found exactly without
// enumerating the compositions. What the plan search (plan_search.h) gives each
// (tp, cp, pp, dp, micro-batch, ZeRO) group with v = 1.
//
// Rank s with n layers costs T_s(n) per micro-batch (forward + backward + recomputation;
// rank 0 also embeds, the last rank runs the head) and exposes D_s(n) of data-parallel
// time, both under its lightest recomputation that fits with n layers, r_s(n) (the
// lightest is best on each rank whatever the others do: plan_search.cc's
// ChooseRecomputation). The iteration (pipeline_model.h, v = 1) is
//
//   F = (m - 1) max_s T_s + sum_s T_s + max_s D_s + hops        (hops: split-free)
//
// Memory grows with n under each recomputation, so rank s can hold 1 .. lim_s layers and
// r_s(n) only gets heavier with n; T_s(n) therefore grows with n, and under a cap T on the
// slowest rank rank s takes at most N_s(T) layers (a prefix). Why the method is exact:
//  * the slowest rank's time of the optimum, T°, is one of the values T_s(n); scanning
//    those values upwards from the first feasible one (sum_s N_s(T) >= layers), the step
//    T = T° admits the optimum;
//  * at each step, min (sum_s T_s + max_s D_s) over the admitted splits is found exactly:
//    a dynamic programme over ranks gives the least sum under a cap on D (a rank's
//    choices: n <= N_s(T) with D_s(n) below the cap), then the cap drops strictly below
//    the maximum D of the split found, until nothing is admitted. Every split with a
//    smaller maximum D stays admitted, so the least sum + max D is among the splits
//    found (the Pareto front of sum against max D);
//  * a split found at cap T has max T_s <= T, so its own F is at most the optimum's;
//  * stops: every split with slowest rank >= T takes at least (m - 1) T + sum_min, and
//    one with a sum >= S at least (m - 1) T_first + S, so the scan ends when those reach
//    the best F found. With m = 1 the max term vanishes and only the widest caps matter.
#ifndef COMMIR_SEARCH_PLAN_STAGE_SPLIT_H_
#define COMMIR_SEARCH_PLAN_STAGE_SPLIT_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "search/plan/layer_cost.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "search/plan/plan_cost.h"

namespace commir::search::plan {

struct StageSplit {
  std::vector<int64_t> layers;  // per rank, rank 0 first
  double seconds = 0;           // its iteration time less the boundary hops
};

// The fastest split of `plan` (pp > 1, v = 1; its split and recomputation are ignored),
// or none when no split fits in HBM. Errors when a layer cannot be measured or the plan
// is not a pipeline without interleaving.
absl::StatusOr<std::optional<StageSplit>> BestStageSplit(const ModelSpec& model,
                                                          const ParallelPlan& plan,
                                                          LayerCostCache& layers,
                                                          const PlanCostOptions& options = {});

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_STAGE_SPLIT_H_
