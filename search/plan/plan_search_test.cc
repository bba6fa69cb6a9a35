#include "search/plan/plan_search.h"

#include <algorithm>
#include <limits>
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

LayerCostOptions On(double hbm_bytes, int gpus_per_node = 8) {
  LayerCostOptions o;
  o.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  if (hbm_bytes > 0) o.predict.hardware.hbm_capacity = hbm_bytes;
  o.predict.gpus_per_node = gpus_per_node;
  return o;
}

// Two nodes of 4 GPUs on a slow network, 10 GB/s per GPU: a data-parallel group of 8
// crosses between the nodes at about 38 GB/s (its 4 members' NICs at 94%), where
// pipelines win over data parallelism at the small capacities the recomputation tests
// need (on the built-in's 50 GB/s NICs the crossing runs at NVLink's bound and FSDP wins).
LayerCostOptions OnSlowNetwork(double hbm_bytes) {
  LayerCostOptions o = On(hbm_bytes, /*gpus_per_node=*/4);
  o.predict.hardware.network_bandwidth_per_gpu = 10e9;
  return o;
}

double Seconds(const PlanCost& c) { return c.time.breakdown.total_s; }

// The search's promises on one result: every plan fits by the model's own
// accounting (costed again here), the ranking is sorted, and the best is no slower than
// the best standard setting tried.
void ExpectSound(const ModelSpec& m, const PlanSearchResult& r, LayerCostCache& layers,
                 const PlanCostOptions& options = {}) {
  const double hbm = layers.options().predict.hardware.hbm_capacity;
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const RankedPlan& p = r.ranked[i];
    absl::StatusOr<PlanCost> again = CostPlan(m, p.plan, layers, options);
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_TRUE(again->fits) << DescribePlan(p.plan);
    for (const StageMemory& s : again->memory) {
      if (options.memory_headroom_bytes < 0) {
        EXPECT_GT(s.headroom, 0);  // the CUDA context
      }
      EXPECT_LE(s.total + s.headroom, hbm) << DescribePlan(p.plan);
    }
    EXPECT_DOUBLE_EQ(Seconds(*again), Seconds(p.cost)) << DescribePlan(p.plan);
    if (i > 0) {
      EXPECT_LE(Seconds(r.ranked[i - 1].cost), Seconds(p.cost));
    }
  }
  if (r.best_standard) {
    ASSERT_FALSE(r.ranked.empty());
    EXPECT_LE(Seconds(r.ranked.front().cost), Seconds(r.best_standard->cost));
  }
}

// Every recomputation per rank of a pp-rank plan: 3^pp lists.
std::vector<std::vector<Recompute>> EveryStageRecompute(int64_t pp) {
  std::vector<std::vector<Recompute>> out = {{}};
  for (int64_t s = 0; s < pp; ++s) {
    std::vector<std::vector<Recompute>> longer;
    for (const std::vector<Recompute>& prefix : out) {
      for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
        longer.push_back(prefix);
        longer.back().push_back(r);
      }
    }
    out = std::move(longer);
  }
  return out;
}

struct BruteForce {
  double best = std::numeric_limits<double>::infinity();
  double best_uniform = std::numeric_limits<double>::infinity();  // one recomputation for all
  // Splits Megatron-LM's --decoder-first/last-pipeline-num-layers can express: the ranks
  // between the first and the last hold equal counts.
  double best_ends_only = std::numeric_limits<double>::infinity();
};

bool EndsOnly(const std::vector<int64_t>& split) {
  for (size_t i = 2; i + 1 < split.size(); ++i) {
    if (split[i] != split[1]) return false;
  }
  return true;
}

// Every plan of the documented space, costed without pruning: the fastest that fits, with
// recomputation enumerated per rank (every one of the 3^pp lists), and the fastest with
// one recomputation for every rank.
BruteForce BruteForceBest(const ModelSpec& m, const PlanSearchOptions& o, LayerCostCache& layers) {
  BruteForce out;
  const int64_t n = o.gpus;
  for (int64_t tp = 1; tp <= std::min<int64_t>(n, layers.options().predict.gpus_per_node); ++tp)
    for (int64_t cp = 1; cp <= std::min(n, o.max_context_parallel); ++cp)
      for (int64_t pp = 1; pp <= n; ++pp) {
        if (n % (tp * cp * pp) != 0) continue;
        const int64_t dp = n / (tp * cp * pp);
        // Every split: the even one (empty, the only one with interleaving) and, with
        // pp > 1, every composition of the layers into pp positive counts.
        std::vector<std::vector<int64_t>> splits = {{}};
        if (pp > 1 && pp <= m.layers) {
          for (std::vector<int64_t>& c : Compositions(m.layers, pp)) splits.push_back(std::move(c));
        }
        const std::vector<std::vector<Recompute>> recomputes = EveryStageRecompute(pp);
        for (int64_t mb = 1; mb <= o.max_micro_batch; mb *= 2)
          for (int64_t v = 1; v <= o.max_virtual_stages; ++v)
            for (int zero = 0; zero <= 3; ++zero)
              for (const std::vector<Recompute>& per_rank : recomputes)
                for (const std::vector<int64_t>& split : splits) {
                    if (zero > 0 && dp * cp == 1) continue;
                    if (zero == 2) continue;  // no Megatron-LM equivalent: not searched
                    if (zero == 3 && pp > 1) continue;
                    if (!split.empty() && v > 1) continue;
                    ParallelPlan p;
                    p.stage_layers = split;
                    p.tp = tp;
                    p.cp = cp;
                    p.pp = pp;
                    p.dp = dp;
                    p.sequence_parallel = tp > 1;
                    p.micro_batch = mb;
                    p.virtual_stages = v;
                    p.zero_stage = zero;
                    p.stage_recompute = per_rank;
                    if (!CheckPlan(m, p).ok()) continue;
                    absl::StatusOr<PlanCost> c = CostPlan(m, p, layers, o.cost);
                    if (!c.ok() || !c->fits) continue;
                    out.best = std::min(out.best, Seconds(*c));
                    if (!p.mixed_recompute())
                      out.best_uniform = std::min(out.best_uniform, Seconds(*c));
                    if (EndsOnly(split))
                      out.best_ends_only = std::min(out.best_ends_only, Seconds(*c));
                  }
      }
  return out;
}

TEST(PlanSearchTest, Gpt13bOnFourGpusMeasuresFewLayersAndBeatsTheStandardSettings) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  LayerCostCache layers(On(0));
  PlanSearchOptions o;
  o.gpus = 4;
  o.top = 5;
  absl::StatusOr<PlanSearchResult> r = SearchPlans(m, o, layers);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->ranked.size(), 5u);
  ASSERT_TRUE(r->best_standard.has_value());
  EXPECT_GT(r->standard_tried, 3);
  ExpectSound(m, *r, layers);
  // Two programs (layer and head) per distinct (tp, cp, micro-batch), not per plan.
  EXPECT_EQ(r->layer_programs % 2, 0);
  EXPECT_LT(r->layer_programs, r->costed);
  EXPECT_GT(r->pruned_bound + r->pruned_dominated, 0);
  for (const RankedPlan& p : r->ranked) EXPECT_EQ(p.plan.gpus(), 4);
  // The same search again measures nothing new.
  absl::StatusOr<PlanSearchResult> again = SearchPlans(m, o, layers);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->layer_programs, 0);
  EXPECT_EQ(DescribePlan(again->ranked.front().plan), DescribePlan(r->ranked.front().plan));
}

// The prunes are exact: on small models over several GPU counts and HBM sizes (small
// enough that plans are dropped), the search's best is the brute force's best. One case per
// (HBM, GPUs), so that the test's shards share them out (the brute force over per-rank
// recomputation lists is the slow part under ASan).
class PruningLosesNothingTest
    : public ::testing::TestWithParam<std::tuple<int64_t, int64_t, double>> {};

TEST_P(PruningLosesNothingTest, AndEveryPlanFits) {
  const auto [model_layers, gpus, hbm_gb] = GetParam();
  const ModelSpec base = *ParseModelSpec(absl::StrCat(
      "name=tiny,arch=gpt,layers=", model_layers,
      ",hidden=1024,heads=16,kv_heads=16,ffn=4096,seq=2048,vocab=32000,global_batch=16"));
  LayerCostCache layers(On(hbm_gb * 1e9, /*gpus_per_node=*/4));
  PlanSearchOptions o;
  o.gpus = gpus;
  o.top = 3;
  o.max_micro_batch = 4;
  o.max_virtual_stages = 4;
  o.max_context_parallel = 2;
  // Below 80 GB the memory mechanics at capacities this small, without headroom; at 80 GB
  // the default headroom (memory_headroom.h).
  if (hbm_gb < 80) o.cost.memory_headroom_bytes = 0;
  absl::StatusOr<PlanSearchResult> r = SearchPlans(base, o, layers);
  ASSERT_TRUE(r.ok()) << r.status();
  ExpectSound(base, *r, layers, o.cost);
  const double brute = BruteForceBest(base, o, layers).best;
  if (r->ranked.empty()) {
    EXPECT_EQ(brute, std::numeric_limits<double>::infinity());
    EXPECT_EQ(r->dropped_memory, r->costed);
  } else {
    EXPECT_DOUBLE_EQ(Seconds(r->ranked.front().cost), brute);
  }
}

// 0.8 to 2 GB: some plans drop (ranks recompute differently; at 0.8 GB on 8 GPUs the best
// pipeline is uneven, 5,3); 80: every plan fits. HBM varies fastest so that the slow 8-GPU
// cases fall in different shards.
INSTANTIATE_TEST_SUITE_P(SmallModels, PruningLosesNothingTest,
                         testing::Combine(testing::Values<int64_t>(8),
                                          testing::Values<int64_t>(1, 2, 4, 8),
                                          testing::Values(0.8, 1.8, 2.0, 80.0)));
// 7 layers: every pipeline is uneven (the brute force tries all 6 splits over 2 ranks and
// 20 over 4; at 0.8 GB on 8 GPUs the best is 4,3).
INSTANTIATE_TEST_SUITE_P(PrimeLayers, PruningLosesNothingTest,
                         testing::Combine(testing::Values<int64_t>(7),
                                          testing::Values<int64_t>(4, 8),
                                          testing::Values(0.8, 80.0)));

// At 1.55 GB on 8 GPUs (two nodes of 4 on a slow network) the best plan is a two-rank
// pipeline whose first rank, holding the most micro-batches in flight, needs
// recomputation and the second none: the per-rank plan is strictly faster than any plan
// with one recomputation for every rank, and the brute force over per-rank lists agrees
// it is the best. (The capacity moves with the activation accounting and the network
// model: 1.35 GB before the accounting stopped counting a sequence-parallel gather whole
// and the attention output twice, 1.3 GB for a GPT model of these sizes before its tied
// table's gradient all-reduce between the end ranks was costed, which on this slow
// network now keeps GPT off pipelines: the model is a Llama, whose tables are untied.)
TEST(PlanSearchTest, RecomputationChosenPerRankBeatsEveryUniformPlan) {
  const ModelSpec m = *ParseModelSpec(
      "name=tiny,arch=llama,layers=8,hidden=1024,heads=16,kv_heads=16,ffn=4096,seq=2048,"
      "vocab=32000,global_batch=16");
  LayerCostCache layers(OnSlowNetwork(1.55e9));
  PlanSearchOptions o;
  o.gpus = 8;
  o.top = 3;
  o.max_micro_batch = 4;
  o.max_virtual_stages = 4;
  o.max_context_parallel = 2;
  // The memory mechanics at a capacity this small: no headroom on top.
  o.cost.memory_headroom_bytes = 0;
  absl::StatusOr<PlanSearchResult> r = SearchPlans(m, o, layers);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->ranked.empty());
  ExpectSound(m, *r, layers, o.cost);
  const RankedPlan& best = r->ranked.front();
  EXPECT_TRUE(best.plan.mixed_recompute()) << DescribePlan(best.plan);
  EXPECT_NE(best.plan.RecomputeOf(0), Recompute::kNone) << DescribePlan(best.plan);
  EXPECT_EQ(best.plan.RecomputeOf(best.plan.pp - 1), Recompute::kNone) << DescribePlan(best.plan);
  const BruteForce brute = BruteForceBest(m, o, layers);
  EXPECT_DOUBLE_EQ(Seconds(best.cost), brute.best);
  EXPECT_LT(Seconds(best.cost), brute.best_uniform);
  // The same plan with its heaviest rank's recomputation everywhere (what Megatron-LM
  // runs) fits and is slower.
  ParallelPlan uniform = best.plan;
  uniform.stage_recompute.clear();
  uniform.recompute = best.plan.HeaviestRecompute();
  absl::StatusOr<PlanCost> heaviest = CostPlan(m, uniform, layers, o.cost);
  ASSERT_TRUE(heaviest.ok()) << heaviest.status();
  EXPECT_TRUE(heaviest->fits);
  EXPECT_GT(Seconds(*heaviest), Seconds(best.cost));
}

// At 1.3 GB on 8 GPUs (two nodes on a slow network), 9 layers over 4 ranks go 2,2,3,2:
// the first rank, with the most micro-batches in flight, recomputes fully and carries
// the embedding, the last the head, and rank 2 (fewer micro-batches in flight than rank 1)
// takes the extra layer, so the middle ranks differ. No first/last-only split reaches it:
// the brute force over every composition and every per-rank recomputation agrees it is
// the best and that the best ends-only plan is strictly slower. (A GPT model of these
// sizes went 1,3,4,1 at 0.8 GB before its tied table's gradient all-reduce between the
// end ranks was costed; on this slow network that keeps GPT off pipelines, so the model
// is a Llama, whose tables are untied.)
TEST(PlanSearchTest, AnySplitBeatsEveryEndsOnlySplit) {
  const ModelSpec m = *ParseModelSpec(
      "name=tiny,arch=llama,layers=9,hidden=1024,heads=16,kv_heads=16,ffn=4096,seq=2048,"
      "vocab=32000,global_batch=16");
  LayerCostCache layers(OnSlowNetwork(1.3e9));
  PlanSearchOptions o;
  o.gpus = 8;
  o.top = 3;
  o.max_micro_batch = 1;
  o.max_virtual_stages = 1;
  o.max_context_parallel = 1;
  // The memory mechanics at a capacity this small: no headroom on top.
  o.cost.memory_headroom_bytes = 0;
  absl::StatusOr<PlanSearchResult> r = SearchPlans(m, o, layers);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_FALSE(r->ranked.empty());
  ExpectSound(m, *r, layers, o.cost);
  const RankedPlan& best = r->ranked.front();
  const std::vector<int64_t> split = LayersPerStage(m, best.plan);
  EXPECT_FALSE(EndsOnly(split)) << DescribePlan(best.plan);
  EXPECT_EQ(split, (std::vector<int64_t>{2, 2, 3, 2})) << DescribePlan(best.plan);
  const BruteForce brute = BruteForceBest(m, o, layers);
  EXPECT_DOUBLE_EQ(Seconds(best.cost), brute.best);
  EXPECT_LT(Seconds(best.cost), brute.best_ends_only);
}

// 30 layers do not split over 4 pipeline ranks evenly: only uneven splits give pp = 4, and with
// every plan kept (no bound) the search reports them.
TEST(PlanSearchTest, UnevenStagesLetPipelinesNotDivideTheLayers) {
  const ModelSpec m = *ParseModelSpec("gpt3-1.3b,layers=30,global_batch=8");
  LayerCostCache layers(On(0));
  PlanSearchOptions o;
  o.gpus = 4;
  o.top = 100000;
  o.max_micro_batch = 1;
  o.max_context_parallel = 1;
  absl::StatusOr<PlanSearchResult> r = SearchPlans(m, o, layers);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pruned_bound, 0);
  int pp4 = 0;
  for (const RankedPlan& p : r->ranked) {
    if (p.plan.pp != 4) continue;
    ++pp4;
    EXPECT_TRUE(p.plan.uneven()) << DescribePlan(p.plan);
    const std::vector<int64_t> split = LayersPerStage(m, p.plan);
    ASSERT_EQ(split.size(), 4u);
    int64_t sum = 0;
    for (int64_t n : split) {
      EXPECT_GE(n, 1);
      sum += n;
    }
    EXPECT_EQ(sum, 30);
  }
  EXPECT_GT(pp4, 0);
  ExpectSound(m, *r, layers);
}

TEST(PlanSearchTest, PlansThatDoNotFitAreDroppedAndCounted) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  LayerCostCache layers(On(1e9));  // 1 GB: not even the weights fit
  PlanSearchOptions o;
  o.gpus = 2;
  absl::StatusOr<PlanSearchResult> r = SearchPlans(m, o, layers);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ranked.empty());
  EXPECT_FALSE(r->best_standard.has_value());
  EXPECT_GT(r->dropped_memory, 0);
  EXPECT_EQ(r->dropped_memory, r->costed);
}

// The recipes' settings (calibration notes, "Whole models"): Llama 3 70B on 64 GPUs at
// sequence 8192 includes NeMo's TP4 PP4 CP2 VP5 MBS 1 and Megatron-Bridge's TP4 PP8 VP5;
// GPT-3 175B on 128 GPUs NeMo's TP4 PP8 VP6 MBS 1 and, with MBS 2, MLPerf's interleave 4.
TEST(PlanSearchTest, StandardSettingsAreTheRecipes) {
  auto has = [](const std::vector<ParallelPlan>& plans, int64_t tp, int64_t cp, int64_t pp,
                int64_t v, int64_t mb) {
    for (const ParallelPlan& p : plans) {
      if (p.tp == tp && p.cp == cp && p.pp == pp && p.virtual_stages == v &&
          p.micro_batch == mb) {
        return true;
      }
    }
    return false;
  };
  const ModelSpec llama = *ParseModelSpec("llama3-70b,seq=8192,global_batch=128");
  const std::vector<ParallelPlan> l = StandardPlans(llama, 64, 8);
  EXPECT_TRUE(has(l, 4, 2, 4, 5, 1));
  EXPECT_TRUE(has(l, 4, 1, 8, 5, 1));
  EXPECT_FALSE(has(l, 4, 1, 8, 1, 4));  // micro-batch 4: no recipe's
  const ModelSpec gpt = *ParseModelSpec("gpt3-175b,global_batch=256");
  const std::vector<ParallelPlan> g = StandardPlans(gpt, 128, 8);
  EXPECT_TRUE(has(g, 4, 1, 8, 6, 1));
  EXPECT_TRUE(has(g, 4, 1, 8, 4, 2));
  EXPECT_FALSE(has(g, 4, 2, 8, 6, 1));  // sequence 2048: no context parallelism
  for (const auto& [model, plans] : {std::pair{&llama, &l}, std::pair{&gpt, &g}}) {
    for (const ParallelPlan& p : *plans) {
      EXPECT_LE(p.tp, 8);
      EXPECT_LE(p.micro_batch, 2);
      EXPECT_EQ(p.sequence_parallel, p.tp > 1);
      EXPECT_EQ(p.zero_stage, p.dp * p.cp > 1 ? 1 : 0);
      if (p.virtual_stages > 1) {
        EXPECT_LE(model->layers / (p.pp * p.virtual_stages), 4) << DescribePlan(p);
      }
    }
  }
  // A model written as CommIR is searched at its own micro-batch only.
  for (const ParallelPlan& p : StandardPlans(gpt, 128, 8, 4)) EXPECT_EQ(p.micro_batch, 4);
}

TEST(PlanSearchTest, RefusesBadRequests) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  LayerCostCache layers(On(0));
  PlanSearchOptions o;
  o.gpus = 0;
  EXPECT_FALSE(SearchPlans(m, o, layers).ok());
  o.gpus = int64_t{1} << 30;  // --gpus's own bound
  absl::StatusOr<PlanSearchResult> huge = SearchPlans(m, o, layers);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("at most 16777216 GPUs, not 1073741824"),
            std::string::npos)
      << huge.status();
  o.gpus = 4;
  o.top = 0;
  EXPECT_FALSE(SearchPlans(m, o, layers).ok());
  o.top = 1;
  ModelSpec bad = m;
  bad.heads = 0;
  EXPECT_FALSE(SearchPlans(bad, o, layers).ok());
}

// A hardware figure that makes the costs infinite or NaN (here set in code, past the
// JSON file's range checks) is an error of the search, never a plan ranked first.
TEST(PlanSearchTest, ANonFiniteCostIsAnErrorNotARank) {
  const ModelSpec m = *ParseModelSpec("gpt3-1.3b,layers=4,global_batch=8");
  for (int figure = 0; figure < 2; ++figure) {
    LayerCostOptions options = On(0);
    if (figure == 0) {
      options.predict.hardware.nvlink_bandwidth_per_direction = 1e-320;
    } else {
      options.predict.hardware.bus_half_efficiency_bytes = 1e308 * 1024 * 1024;
    }
    LayerCostCache layers(options);
    PlanSearchOptions o;
    o.gpus = 2;
    o.threads = 1;
    absl::StatusOr<PlanSearchResult> r = SearchPlans(m, o, layers);
    ASSERT_FALSE(r.ok()) << figure << ": ranked first "
                         << (r->ranked.empty() ? std::string("nothing")
                                               : absl::StrCat(Seconds(r->ranked.front().cost), " s"));
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    // Said by the layer's prediction or the plan's costing, whichever sees it first.
    EXPECT_NE(r.status().message().find("finite"), std::string::npos) << r.status();
  }
}

TEST(PlanSearchTest, NoShapeAtAllSaysWhy) {
  // 3 GPUs: tp=3 divides no head count of 16, cp=3 no sequence of 2048, pp=3 exceeds the
  // 2 layers, and dp=3 does not divide the global batch of 1.
  const ModelSpec m = *ParseModelSpec("gpt3-1.3b,layers=2,global_batch=1");
  LayerCostCache layers(On(0));
  PlanSearchOptions o;
  o.gpus = 3;
  absl::StatusOr<PlanSearchResult> r = SearchPlans(m, o, layers);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no tp x cp x pp x dp shape of 3 GPUs suits gpt3-1.3b"),
            std::string::npos)
      << r.status();
  EXPECT_NE(r.status().message().find("global batch (1)"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace commir::search::plan
