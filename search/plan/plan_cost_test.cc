#include "search/plan/plan_cost.h"

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "search/plan/layer_cost.h"
#include "search/plan/model_spec.h"
#include "search/plan/parallel_plan.h"
#include "sim/hardware.h"

namespace commir::search::plan {
namespace {

const sim::HardwareSpec& H100() { return *sim::FindBuiltinHardware("h100-sxm"); }

class PlanCostTest : public ::testing::Test {
 protected:
  PlanCostTest() : layers_(Options()) {}
  static LayerCostOptions Options() {
    LayerCostOptions o;
    o.predict.hardware = H100();
    return o;
  }
  PlanCost Cost(const ModelSpec& m, const ParallelPlan& p) {
    absl::StatusOr<PlanCost> c = CostPlan(m, p, layers_);
    EXPECT_TRUE(c.ok()) << DescribePlan(p) << ": " << c.status();
    if (!c.ok()) return PlanCost{};
    std::printf("%-55s %8.1f ms  MFU %4.1f%%  peak %6.1f GB  bubble %4.1f%%\n",
                DescribePlan(p).c_str(), c->time.breakdown.total_s * 1e3,
                100 * c->model_flops_utilization, c->peak_memory_bytes / 1e9,
                100 * c->time.bubble_fraction);
    return *c;
  }
  LayerCostCache layers_;
};

ParallelPlan Plan(int64_t tp, int64_t pp, int64_t dp, int64_t micro_batch) {
  ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.sequence_parallel = tp > 1;
  p.micro_batch = micro_batch;
  return p;
}

TEST_F(PlanCostTest, Gpt13bOnFourGpusIsPlausibleForEveryStandardSplit) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  for (const ParallelPlan& p :
       {Plan(1, 1, 4, 4), Plan(2, 1, 2, 4), Plan(4, 1, 1, 4), Plan(1, 4, 1, 4), Plan(2, 2, 1, 2)}) {
    const PlanCost c = Cost(m, p);
    EXPECT_TRUE(c.fits) << DescribePlan(p);
    EXPECT_GT(c.model_flops_utilization, 0.2) << DescribePlan(p);
    EXPECT_LT(c.model_flops_utilization, 0.8) << DescribePlan(p);
    const TimeBreakdown& b = c.time.breakdown;
    EXPECT_NEAR(b.compute_s + b.recompute_s + b.exposed_comm_s + b.bubble_s, b.total_s,
                1e-9 * b.total_s);
    EXPECT_NEAR(c.tokens_per_second, m.global_batch * m.sequence / b.total_s, 1e-6);
    EXPECT_EQ(c.memory.size(), static_cast<size_t>(p.pp));
  }
  // Pure data parallelism suits a 1.3B model on one node better than pure tensor
  // parallelism (whose activation collectives are exposed).
  EXPECT_LT(Cost(m, Plan(1, 1, 4, 4)).time.breakdown.total_s,
            Cost(m, Plan(4, 1, 1, 4)).time.breakdown.total_s);
  // A layer, a head and an embedding per (tp, micro-batch) layout.
  EXPECT_EQ(layers_.measured(), 3 * 4);
}

TEST_F(PlanCostTest, PipelineBubbleFollowsTheSchedule) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  const ParallelPlan p = Plan(1, 4, 1, 4);  // 128 micro-batches of 4
  const PlanCost c = Cost(m, p);
  const double m_count = 128, pp = 4;
  // Ranks differ by the embedding and the head, so the 1F1B figure holds roughly.
  EXPECT_NEAR(c.time.bubble_fraction, (pp - 1) / (m_count + pp - 1), 0.01);
  EXPECT_GT(c.memory[0].activations, 3 * c.memory[3].activations * 0.9);
  ParallelPlan interleaved = p;
  interleaved.virtual_stages = 2;
  const PlanCost ci = Cost(m, interleaved);
  EXPECT_LT(ci.time.breakdown.bubble_s, c.time.breakdown.bubble_s);
  EXPECT_GT(ci.memory[0].activations, c.memory[0].activations);
}

TEST_F(PlanCostTest, RecomputationTradesTimeForMemory) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  ParallelPlan p = Plan(2, 1, 2, 8);
  const PlanCost none = Cost(m, p);
  p.recompute = Recompute::kSelective;
  const PlanCost selective = Cost(m, p);
  p.recompute = Recompute::kFull;
  const PlanCost full = Cost(m, p);
  EXPECT_EQ(none.time.breakdown.recompute_s, 0);
  EXPECT_GT(selective.time.breakdown.recompute_s, 0);
  EXPECT_GT(full.time.breakdown.recompute_s, selective.time.breakdown.recompute_s);
  EXPECT_LT(selective.memory[0].activations, none.memory[0].activations);
  EXPECT_LT(full.memory[0].activations, selective.memory[0].activations);
  EXPECT_GT(full.time.breakdown.total_s, none.time.breakdown.total_s);
}

// Each rank is costed with its own recomputation: its memory and time per micro-batch are
// those of the uniform plan with that recomputation, rank by rank.
TEST_F(PlanCostTest, RecomputationPerRankCostsEachRankWithItsOwn) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  ParallelPlan p = Plan(1, 4, 1, 4);
  const std::vector<Recompute> per_rank = {Recompute::kFull, Recompute::kSelective,
                                           Recompute::kNone, Recompute::kNone};
  SetStageRecompute(p, per_rank);
  const PlanCost mixed = Cost(m, p);
  ASSERT_EQ(mixed.memory.size(), 4u);
  for (int64_t s = 0; s < 4; ++s) {
    ParallelPlan uniform = Plan(1, 4, 1, 4);
    uniform.recompute = per_rank[s];
    const PlanCost u = Cost(m, uniform);
    SCOPED_TRACE(s);
    EXPECT_DOUBLE_EQ(mixed.memory[s].total, u.memory[s].total);
    EXPECT_DOUBLE_EQ(mixed.stages[s].recompute_s, u.stages[s].recompute_s);
    EXPECT_DOUBLE_EQ(mixed.stages[s].backward_s, u.stages[s].backward_s);
  }
  EXPECT_GT(mixed.stages[0].recompute_s, mixed.stages[1].recompute_s);
  EXPECT_GT(mixed.stages[1].recompute_s, 0);
  EXPECT_EQ(mixed.stages[2].recompute_s, 0);
  // Between the uniform extremes in time.
  ParallelPlan none = Plan(1, 4, 1, 4), full = Plan(1, 4, 1, 4);
  full.recompute = Recompute::kFull;
  EXPECT_GT(mixed.time.breakdown.total_s, Cost(m, none).time.breakdown.total_s);
  EXPECT_LT(mixed.time.breakdown.total_s, Cost(m, full).time.breakdown.total_s);
}

TEST_F(PlanCostTest, ZeroShardsStateAndLlama70bNeedsModelParallelism) {
  const ModelSpec gpt = *Preset("gpt3-1.3b");
  ParallelPlan p = Plan(1, 1, 4, 4);
  const PlanCost zero0 = Cost(gpt, p);
  p.zero_stage = 1;
  const PlanCost zero1 = Cost(gpt, p);
  EXPECT_NEAR(zero1.memory[0].optimizer * 4, zero0.memory[0].optimizer, 1);
  EXPECT_EQ(zero1.memory[0].weights, zero0.memory[0].weights);
  ParallelPlan cp = Plan(2, 1, 1, 4);
  cp.cp = 2;
  cp.zero_stage = 1;  // the distributed optimizer shards over dp x cp
  const PlanCost sharded = Cost(gpt, cp);
  EXPECT_NEAR(sharded.memory[0].optimizer * 2, 12.0 * sharded.stages[0].parameters_per_device, 1);
  PlanCostOptions no_overlap;
  no_overlap.overlap_dp_comm = false;  // the gradients' reduce-scatter over the cp pair shows
  absl::StatusOr<PlanCost> exposed = CostPlan(gpt, cp, layers_, no_overlap);
  ASSERT_TRUE(exposed.ok()) << exposed.status();
  EXPECT_GT(exposed->time.dp_exposed_s, 0);

  const ModelSpec llama = *Preset("llama3-70b");
  EXPECT_FALSE(Cost(llama, Plan(1, 1, 8, 1)).fits);  // 70B x 18 bytes on every GPU
  ParallelPlan big = Plan(8, 8, 1, 1);
  big.recompute = Recompute::kFull;
  const PlanCost fits = Cost(llama, big);
  EXPECT_TRUE(fits.fits) << fits.peak_memory_bytes;
  EXPECT_GT(fits.model_flops_utilization, 0.1);
}

TEST_F(PlanCostTest, TheCachesClusterPlacesTheStages) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  const ParallelPlan p = Plan(2, 2, 1, 2);
  LayerCostOptions small_nodes = Options();
  small_nodes.predict.gpus_per_node = 2;  // each pipeline rank is a node of its own
  LayerCostCache layers(small_nodes);
  absl::StatusOr<PlanCost> across = CostPlan(m, p, layers);
  ASSERT_TRUE(across.ok()) << across.status();
  const PlanCost inside = Cost(m, p);
  EXPECT_GT(across->time.p2p_s, inside.time.p2p_s);
  EXPECT_GT(across->time.breakdown.total_s, inside.time.breakdown.total_s);
}

// GPT-3 1.3B's 24 layers over 4 ranks as 5 + 7 + 7 + 5: the ends' compute drops by two
// layers' (the embedding and head stay), the middle ranks' grows by one, and the first
// rank's activations (it holds the most micro-batches) shrink.
TEST_F(PlanCostTest, UnevenStagesMoveLayersOffTheEnds) {
  const ModelSpec m = *Preset("gpt3-1.3b");
  const ParallelPlan even = Plan(1, 4, 1, 4);
  ParallelPlan uneven = even;
  uneven.first_stage_layers = 5;
  uneven.last_stage_layers = 5;
  EXPECT_EQ(LayersPerStage(m, uneven), (std::vector<int64_t>{5, 7, 7, 5}));
  const PlanCost a = Cost(m, even);
  const PlanCost b = Cost(m, uneven);
  const double layer_f = a.stages[1].forward_s / 6;
  EXPECT_NEAR(b.stages[0].forward_s, a.stages[0].forward_s - layer_f, 1e-9);
  EXPECT_NEAR(b.stages[1].forward_s, a.stages[1].forward_s + layer_f, 1e-9);
  EXPECT_NEAR(b.stages[3].forward_s, a.stages[3].forward_s - layer_f, 1e-9);
  EXPECT_LT(b.memory[0].activations, a.memory[0].activations);
  EXPECT_GT(b.memory[1].activations, a.memory[1].activations);
  EXPECT_LT(b.stages[0].parameters_per_device, a.stages[0].parameters_per_device);
}

// CostPlan's fallback to a layer's plain-collectives variant (LayerCost::plain), on
// layer costs constructed here: a scheduled layer that is faster but keeps more
// activations than fit, and its plain variant that fits, is costed plain; where the
// scheduled one fits, or neither does, the scheduled one is kept. The sizes: GPT-3 1.3B
// on one H100 (80 GB) keeps about 24 GB of weights, gradients and optimizer state, so
// 24 layers x 4 GB of activations do not fit and 24 x 0.1 GB do.
TEST(PlanCostFallbackTest, APlanTheScheduledLayersOverflowIsCostedWithThePlainOnes) {
  const ModelSpec m = *ParseModelSpec("gpt3-1.3b,global_batch=8");
  ASSERT_EQ(m.layers, 24);
  const ParallelPlan p = Plan(1, 1, 1, 1);
  const LayerLayout layout{1, 1, false, 1};
  LayerCost plain;
  plain.forward_s = 3e-3;
  plain.backward_s = 6e-3;
  plain.activation_bytes = int64_t{100} << 20;
  plain.input_bytes = int64_t{8} << 20;
  LayerCost head;
  head.forward_s = 1e-3;
  head.backward_s = 2e-3;
  head.activation_bytes = int64_t{500} << 20;
  head.input_bytes = plain.input_bytes;
  auto costed = [&](int64_t scheduled_activation_bytes, int64_t plain_activation_bytes) {
    LayerCost scheduled;
    scheduled.forward_s = 2e-3;
    scheduled.backward_s = 4e-3;
    scheduled.activation_bytes = scheduled_activation_bytes;
    scheduled.input_bytes = plain.input_bytes;
    scheduled.schedule = ParseLayerSchedule("ring-collective-matmul")->passes;
    LayerCost lighter = plain;
    lighter.activation_bytes = plain_activation_bytes;
    scheduled.plain = std::make_shared<const LayerCost>(lighter);
    LayerCostOptions o;
    o.predict.hardware = H100();
    LayerCostCache layers(o);
    layers.Put(m, LayerKind::kTransformer, layout, scheduled);
    layers.Put(m, LayerKind::kHead, layout, head);
    absl::StatusOr<PlanCost> c = CostPlan(m, p, layers);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : PlanCost{};
  };
  constexpr int64_t kGiB = int64_t{1} << 30;
  // Both fit: the scheduled layers, 24 x 1 ms faster forward than plain.
  const PlanCost both_fit = costed(int64_t{100} << 20, int64_t{50} << 20);
  EXPECT_TRUE(both_fit.fits);
  EXPECT_EQ(both_fit.layer_schedule.ToString(), "ring-collective-matmul");
  // The scheduled layers overflow, the plain ones fit: plain, 24 x (3 - 2) ms slower
  // in the forward, 24 x (6 - 4) ms in the backward.
  const PlanCost fallback = costed(4 * kGiB, int64_t{100} << 20);
  EXPECT_TRUE(fallback.fits);
  EXPECT_TRUE(fallback.layer_schedule.empty());
  ASSERT_EQ(fallback.stages.size(), 1u);
  ASSERT_EQ(both_fit.stages.size(), 1u);
  EXPECT_NEAR(fallback.stages[0].forward_s - both_fit.stages[0].forward_s, 24 * 1e-3, 1e-9);
  EXPECT_NEAR(fallback.stages[0].backward_s - both_fit.stages[0].backward_s, 24 * 2e-3, 1e-9);
  EXPECT_GT(fallback.time.breakdown.total_s, both_fit.time.breakdown.total_s);
  // Neither fits: the scheduled (faster) plan is reported, as not fitting.
  const PlanCost neither = costed(4 * kGiB, 3 * kGiB);
  EXPECT_FALSE(neither.fits);
  EXPECT_EQ(neither.layer_schedule.ToString(), "ring-collective-matmul");
}

TEST_F(PlanCostTest, RefusesInvalidPlans) {
  absl::StatusOr<PlanCost> c = CostPlan(*Preset("gpt3-1.3b"), Plan(1, 5, 1, 1), layers_);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("do not split evenly"), std::string::npos);
}

}  // namespace
}  // namespace commir::search::plan
