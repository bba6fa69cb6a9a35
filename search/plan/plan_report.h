// The plan search's report (`commir-search --plan`): for each cluster searched
// (one, or several for a hardware what-if), the ranked plans with iteration time,
// tokens/s, MFU, the time breakdown and peak memory, the counts of plans costed, dropped
// and pruned, the best standard Megatron-LM setting beside the best plan, the best plan's
// memory per pipeline stage and its Megatron-LM launch arguments. Deterministic (no
// timings of the search itself), so goldens can hold it.
#ifndef COMMIR_SEARCH_PLAN_PLAN_REPORT_H_
#define COMMIR_SEARCH_PLAN_PLAN_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "search/plan/model_spec.h"
#include "search/plan/plan_search.h"

namespace commir::search::plan {

// One cluster searched and what the search found on it.
struct PlanScenario {
  std::string label;  // "h100-sxm", or "h100-sxm hbm=40GB" in a sweep
  int64_t gpus_per_node = 8;
  double hbm_bytes = 0;
  PlanSearchResult result;
};

std::string FormatPlanTable(const ModelSpec& model, int64_t gpus,
                            const std::vector<PlanScenario>& scenarios);
std::string FormatPlanJson(const ModelSpec& model, int64_t gpus,
                           const std::vector<PlanScenario>& scenarios);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_PLAN_REPORT_H_
