#include "search/plan/stage_split.h"

#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "search/plan/compositions_for_test.h"
#include "search/plan/layer_cost.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "search/plan/plan_cost.h"
#include "sim/hardware.h"

namespace commir::search::plan {
namespace {

constexpr Recompute kLightestFirst[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};

// The plan with `split` and each rank's lightest recomputation that fits (the per-rank
// choice plan_search_test checks against every list), costed; none when a rank fits none.
std::optional<PlanCost> CostSplit(const ModelSpec& m, ParallelPlan p,
                                  const std::vector<int64_t>& split, LayerCostCache& layers) {
  p.stage_layers = split;
  std::vector<PlanCost> uniform;
  for (Recompute r : kLightestFirst) {
    p.recompute = r;
    absl::StatusOr<PlanCost> c = CostPlan(m, p, layers);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return std::nullopt;
    uniform.push_back(*c);
  }
  std::vector<Recompute> per_rank;
  for (int64_t s = 0; s < p.pp; ++s) {
    int pick = 0;
    while (pick < 3 && !uniform[pick].memory[s].fits) ++pick;
    if (pick == 3) return std::nullopt;
    per_rank.push_back(kLightestFirst[pick]);
  }
  SetStageRecompute(p, per_rank);
  absl::StatusOr<PlanCost> c = CostPlan(m, p, layers);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok() || !c->fits) return std::nullopt;
  return *c;
}

// (layers, pp, dp, ZeRO, HBM in GB, global batch).
class StageSplitTest
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, int64_t, int, double, int64_t>> {
};

// The split found is as fast as the fastest of every composition. One GPU per node puts
// the data-parallel reduction on the network, so that it is exposed and differs by rank
// and by split (the Pareto walk over the maximum D); small HBM makes ranks recompute.
TEST_P(StageSplitTest, EqualsTheBruteForceOverEveryComposition) {
  const auto [model_layers, pp, dp, zero, hbm_gb, global_batch] = GetParam();
  const ModelSpec m = *ParseModelSpec(absl::StrCat(
      "name=tiny,arch=gpt,layers=", model_layers,
      ",hidden=1024,heads=16,kv_heads=16,ffn=4096,seq=2048,vocab=32000,global_batch=",
      global_batch));
  LayerCostOptions o;
  o.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  o.predict.hardware.hbm_capacity = hbm_gb * 1e9;
  o.predict.gpus_per_node = 1;
  LayerCostCache layers(o);
  ParallelPlan p;
  p.pp = pp;
  p.dp = dp;
  p.zero_stage = zero;
  double brute = std::numeric_limits<double>::infinity();
  for (const std::vector<int64_t>& split : Compositions(model_layers, pp)) {
    if (std::optional<PlanCost> c = CostSplit(m, p, split, layers)) {
      brute = std::min(brute, c->time.breakdown.total_s);
    }
  }
  absl::StatusOr<std::optional<StageSplit>> found = BestStageSplit(m, p, layers);
  ASSERT_TRUE(found.ok()) << found.status();
  if (brute == std::numeric_limits<double>::infinity()) {
    EXPECT_FALSE(found->has_value());
    return;
  }
  ASSERT_TRUE(found->has_value());
  std::optional<PlanCost> c = CostSplit(m, p, (*found)->layers, layers);
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->time.breakdown.total_s, brute);
  // Its own figure is the plan's time less the boundary hops.
  EXPECT_NEAR((*found)->seconds, c->time.pipeline_s + c->time.dp_exposed_s -
                                     2.0 * (pp - 1) * c->time.p2p_s,
              1e-9 * brute);
}

INSTANTIATE_TEST_SUITE_P(SmallModels, StageSplitTest,
                         testing::Combine(testing::Values<int64_t>(7, 10),
                                          testing::Values<int64_t>(2, 3, 4),
                                          testing::Values<int64_t>(1, 4),
                                          testing::Values(0, 1),
                                          testing::Values(0.7, 1.0, 80.0),
                                          testing::Values<int64_t>(4, 16)));

TEST(StageSplitTest, RefusesPlansWithoutAPipeline) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  LayerCostOptions o;
  o.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  LayerCostCache layers(o);
  ParallelPlan p;
  EXPECT_FALSE(BestStageSplit(m, p, layers).ok());  // pp = 1
  p.pp = 2;
  p.virtual_stages = 2;
  EXPECT_FALSE(BestStageSplit(m, p, layers).ok());
}

}  // namespace
}  // namespace commir::search::plan
