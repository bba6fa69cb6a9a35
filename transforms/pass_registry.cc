#include "transforms/pass_registry.h"

#include <algorithm>
#include <vector>

#include "commir/check.h"
#include "transforms/canonicalize.h"
#include "transforms/cse.h"
#include "transforms/dce.h"
#include "transforms/sharding/comm_report.h"
#include "transforms/sharding/lower.h"
#include "transforms/sharding/propagate.h"

namespace commir {
namespace {

std::vector<PassInfo> BuildRegistry() {
  std::vector<PassInfo> passes = {
      {"canonicalize",
       "Fold constants and simplify algebraic identities, to a fixed point",
       {{"fold-constants", PassOptionType::kBool, "true",
         "Fold elementwise and index ops whose operands are all constants into 'full'"},
        {"max-rewrites", PassOptionType::kInt, "-1",
         "Stop after this many rewrites (-1: no limit); bisects a bad rewrite"}},
       MakePass<CanonicalizePass>},
      {"cse",
       "Merge equivalent ops into an identical op that dominates them",
       {},
       MakePass<CsePass>},
      {"dce",
       "Erase unused ops, dead loops and loop-carried values nothing reads",
       {},
       MakePass<DcePass>},
      {"propagate-sharding",
       "Complete the layout of every value of global functions from arguments, results and "
       "annotations",
       {{"iterations", PassOptionType::kInt, "1",
         "Backward/forward rounds (1 to 100); later rounds see the layouts chosen before"}},
       MakePass<sharding::PropagateShardingPass>},
      {"lower-to-spmd",
       "Partition global functions into spmd functions with explicit collectives",
       {},
       MakePass<sharding::LowerToSpmdPass>},
      {"comm-report",
       "Print to stderr, per spmd function, the collectives by kind: count and bytes per device",
       {},
       MakePass<sharding::CommReportPass>},
  };
  std::sort(passes.begin(), passes.end(),
            [](const PassInfo& a, const PassInfo& b) { return a.name < b.name; });
  for (size_t i = 1; i < passes.size(); ++i) {
    COMMIR_CHECK(passes[i - 1].name != passes[i].name, "two passes share a name");
  }
  return passes;
}

}  // namespace

absl::Span<const PassInfo> RegisteredPasses() {
  static const std::vector<PassInfo>* passes = new std::vector<PassInfo>(BuildRegistry());
  return *passes;
}

const PassInfo* FindRegisteredPass(absl::string_view name) {
  for (const PassInfo& info : RegisteredPasses()) {
    if (info.name == name) return &info;
  }
  return nullptr;
}

}  // namespace commir
