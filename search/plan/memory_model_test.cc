#include "search/plan/memory_model.h"

#include <algorithm>
#include <cstdio>

#include "gtest/gtest.h"
#include "search/plan/layer_cost.h"
#include "search/plan/model_spec.h"
#include "search/plan/pipeline_schedule.h"
#include "sim/hardware.h"

namespace commir::search::plan {
namespace {

StageMemory Use(const StageFootprint& f, const MemoryConfig& c) {
  absl::StatusOr<StageMemory> m = StageMemoryUse(f, c);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : StageMemory{};
}

// ZeRO (Rajbhandari et al. 2020), Figure 1: a 7.5B-parameter model on 64-way data
// parallelism takes 120 GB per device with mixed-precision Adam (16 bytes/param), 31.4 GB
// with optimizer sharding, 16.6 GB with gradients sharded too and 1.9 GB with all three.
TEST(MemoryModelTest, ZeroStagesMatchThePaper) {
  StageFootprint f;
  f.parameters_per_device = 7'500'000'000;
  MemoryConfig c;
  c.dp = 64;
  c.grad_bytes_per_param = 2;
  const double expected_gb[] = {120, 31.4, 16.6, 1.9};
  for (int stage = 0; stage <= 3; ++stage) {
    c.zero_stage = stage;
    EXPECT_NEAR(Use(f, c).total / 1e9, expected_gb[stage], 0.05) << "ZeRO " << stage;
  }
  c.zero_stage = 0;
  c.grad_bytes_per_param = 4;  // fp32 main gradients: 18 bytes/param
  EXPECT_NEAR(Use(f, c).total, 18 * 7.5e9, 1);
}

TEST(MemoryModelTest, OneFOneBRankSHoldsPMinusSMicroBatches) {
  for (int64_t s = 0; s < 4; ++s) {
    EXPECT_EQ(InFlightMicrobatches(4, s, 1, 8), 4 - s);
  }
  EXPECT_EQ(InFlightMicrobatches(4, 0, 1, 2), 2);  // fewer micro-batches than stages
  // Interleaved: rank 0 holds p (1 + (p-1)/(p v)) micro-batches' worth (Korthikanti
  // et al. 2022, section 4.2.3).
  for (int64_t v : {2, 4}) {
    EXPECT_NEAR(InFlightMicrobatches(8, 0, v, 64), 8 * (1 + 7.0 / (8 * v)), 1e-12) << v;
  }
  EXPECT_NEAR(InFlightMicrobatches(4, 3, 2, 8), (0 + 4 + 1) / 2.0, 1e-12);
  // Interleaved with m == p: every forward runs first (Megatron-LM), so every rank holds
  // all m x v chunks, the last rank included.
  EXPECT_EQ(InFlightMicrobatches(4, 3, 2, 4), 4);
}

// The count of micro-batches a rank holds, in closed form from the published schedules
// (not from the schedule code the model and the orders share):
//   - 1F1B (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
//     Clusters Using Megatron-LM", section 2.2.1): rank s of p runs p - s - 1 warm-up
//     forwards and one more before its first backward, so it holds min(p - s, m);
//   - interleaved with v chunks (same paper, section 2.2.2; Megatron-LM's
//     forward_backward_pipelining_with_interleaving): 2 (p - s - 1) + (v - 1) p warm-up
//     chunk forwards plus one, i.e. (2 (p - s - 1) + (v - 1) p + 1) / v micro-batches'
//     worth; with m == p every forward runs first, so all m.
double ClosedFormInFlight(int64_t p, int64_t s, int64_t v, int64_t m) {
  if (v == 1) return static_cast<double>(std::min(p - s, m));
  if (m == p) return static_cast<double>(m);
  return static_cast<double>(2 * (p - s - 1) + (v - 1) * p + 1) / static_cast<double>(v);
}

TEST(MemoryModelTest, InFlightCountMatchesTheClosedForm) {
  for (int64_t p = 1; p <= 6; ++p) {
    for (int64_t v = 1; v <= 3; ++v) {
      for (int64_t m = 1; m <= 4 * p; ++m) {
        if (v > 1 && m % p != 0) continue;  // interleaving takes micro-batches p at a time
        for (int64_t s = 0; s < p; ++s) {
          EXPECT_DOUBLE_EQ(InFlightMicrobatches(p, s, v, m), ClosedFormInFlight(p, s, v, m))
              << "p=" << p << " v=" << v << " m=" << m << " rank " << s;
        }
      }
    }
  }
  // Worked by hand: p = 4, v = 2, m = 8 warms up 10, 8, 6, 4 chunks on ranks 0..3, so
  // holds 11, 9, 7, 5 chunks: 5.5, 4.5, 3.5, 2.5 micro-batches.
  const double by_hand[] = {5.5, 4.5, 3.5, 2.5};
  for (int64_t s = 0; s < 4; ++s) EXPECT_DOUBLE_EQ(InFlightMicrobatches(4, s, 2, 8), by_hand[s]);
}

// The orders the cpu check executes (pipeline_schedule.h) hold, at their peak, the
// micro-batches the closed form says: the memory model and the executed orders agree
// because each agrees with the papers.
TEST(MemoryModelTest, ScheduleOrdersPeakAtTheClosedForm) {
  for (int64_t p = 1; p <= 6; ++p) {
    for (int64_t v = 1; v <= 3; ++v) {
      for (int64_t m = 1; m <= 4 * p; ++m) {
        if (v > 1 && m % p != 0) continue;
        for (int64_t s = 0; s < p; ++s) {
          int64_t held = 0, peak = 0, forwards = 0, backwards = 0;
          for (const PipelineStep& step : OneFOneBSchedule(p, v, m, s)) {
            held += step.forward ? 1 : -1;
            (step.forward ? forwards : backwards) += 1;
            peak = std::max(peak, held);
          }
          EXPECT_EQ(forwards, m * v);
          EXPECT_EQ(backwards, m * v);
          EXPECT_DOUBLE_EQ(static_cast<double>(peak) / static_cast<double>(v),
                           ClosedFormInFlight(p, s, v, m))
              << "p=" << p << " v=" << v << " m=" << m << " rank " << s;
        }
      }
    }
  }
  // Narayanan et al. 2021, Figure 4 (top): rank 0 of 4 with 8 micro-batches.
  EXPECT_EQ(DescribeSchedule(OneFOneBSchedule(4, 1, 8, 0), 1),
            "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
}

TEST(MemoryModelTest, RecomputationShrinksActivationsAndCapacityDecidesFit) {
  StageFootprint f;
  f.parameters_per_device = 1'000'000'000;
  f.activation_bytes = 8'000'000'000;
  f.selective_saved_bytes = 2'000'000'000;
  f.input_bytes = 500'000'000;
  f.largest_layer_activation_bytes = 1'000'000'000;
  MemoryConfig c;
  c.pipeline_size = 4;
  c.microbatches = 8;
  const StageMemory none = Use(f, c);
  EXPECT_EQ(none.activations, 4 * 8e9);
  c.recompute = Recompute::kSelective;
  EXPECT_EQ(Use(f, c).activations, 4 * 6e9);
  c.recompute = Recompute::kFull;
  EXPECT_EQ(Use(f, c).activations, 4 * 0.5e9 + 1e9);
  EXPECT_EQ(none.weights + none.gradients + none.optimizer, 18e9);
  c.recompute = Recompute::kNone;
  c.hbm_capacity_bytes = 80e9;
  EXPECT_TRUE(Use(f, c).fits);
  c.hbm_capacity_bytes = 40e9;
  EXPECT_FALSE(Use(f, c).fits);
  c.stage = 3;  // the last rank holds one micro-batch
  EXPECT_TRUE(Use(f, c).fits);
}

TEST(MemoryModelTest, KorthikantiFormulaByHand) {
  // GPT-3 175B, s = 2048, b = 1, h = 12288, a = 96, t = 8: s b h (34 + 5 x 96 x 2048 /
  // 12288) / 8 = 25,165,824 x 114 / 8.
  EXPECT_EQ(KorthikantiLayerActivationBytes(2048, 1, 12288, 96, 8, false), 358'612'992.0);
  EXPECT_EQ(KorthikantiLayerActivationBytes(2048, 1, 12288, 96, 8, true), 106'954'752.0);
}

// The activations measured on the GPT layer's program are Korthikanti et al.'s tensors
// (section 4.1, 16-bit, per layer: layer norms' inputs 4 s b h, the QKV and FC1 inputs
// 2 s b h each, Q and K 4 s b h, V 2 s b h, the projection's input 2 s b h, FC1's output
// and GELU's 8 s b h each, with sequence parallelism all over t) without the two dropout
// masks (s b h each: the programs have no dropout) and the s^2 softmax terms (a fused
// attention stores none), plus the fused attention's own log-sum-exp, one f32 per query
// and local head: 32 s b h / t + 4 s b a / t bytes. The gathered QKV and FC1 inputs count
// sharded (Megatron-LM gathers them again in the backward), the attention output once in
// either layout, and the layer's output not at all (the next layer keeps it).
TEST(MemoryModelTest, MeasuredGptActivationsAreKorthikantisTensors) {
  const ModelSpec m = *ParseModelSpec("gpt3-1.3b");
  LayerCostOptions options;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.schedule = LayerSchedule::None();
  for (int64_t t : {1, 2, 4}) {
    absl::StatusOr<LayerCost> cost =
        MeasureLayerCost(m, LayerKind::kTransformer, {t, 1, t > 1, 1}, options);
    ASSERT_TRUE(cost.ok()) << cost.status();
    const int64_t sbh = m.sequence * m.hidden;
    const int64_t expected = 32 * sbh / t + 4 * m.sequence * m.heads / t;
    EXPECT_EQ(cost->activation_bytes, expected) << "tp=" << t;
    // With Korthikanti's dropout masks, his selective figure exactly.
    EXPECT_EQ(static_cast<double>(cost->activation_bytes - 4 * m.sequence * m.heads / t +
                                  2 * sbh / t),
              KorthikantiLayerActivationBytes(m.sequence, 1, m.hidden, m.heads, t, true))
        << "tp=" << t;
    // Selective recomputation drops the attention output: 2 s b h / t and the
    // log-sum-exp.
    EXPECT_EQ(cost->selective_saved_bytes, 2 * sbh / t + 4 * m.sequence * m.heads / t)
        << "tp=" << t;
  }
}

// Without sequence parallelism (Korthikanti et al., section 4.1, equation 2: s b h (10 +
// 24 / t + 5 a s / (h t)) with dropout): the layer norms' inputs and the QKV and FC1
// inputs are whole on every rank, 8 s b h, the rest is split, 24 s b h / t; less the
// two dropout masks (s b h each, whole) and the s^2 terms, plus the log-sum-exp. At
// micro-batch 2 the partitioner lowers the output projection of @layer and of its copy
// in @layer_grad differently (an all_gather of its input in the one, an all_reduce of
// its output in the other), which a match by value name took for a backward read of
// the projection's output (2 s b h more). Where the partitioner all-gathers the output
// projection's weight instead, the backward reads the gathered weight: a parameter, not
// an activation (h^2 bytes / t here, which at b = 2, s = h is s b h / t exactly).
TEST(MemoryModelTest, MeasuredGptActivationsWithoutSequenceParallelism) {
  const ModelSpec m = *ParseModelSpec("gpt3-1.3b");
  LayerCostOptions options;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.schedule = LayerSchedule::None();
  const int64_t b = 2;
  for (int64_t t : {2, 4, 8}) {
    absl::StatusOr<LayerCost> cost =
        MeasureLayerCost(m, LayerKind::kTransformer, {t, 1, false, b}, options);
    ASSERT_TRUE(cost.ok()) << cost.status();
    const int64_t sbh = m.sequence * b * m.hidden;
    const int64_t lse = 4 * m.sequence * b * m.heads / t;
    EXPECT_EQ(cost->activation_bytes, 8 * sbh + 24 * sbh / t + lse) << "tp=" << t;
    EXPECT_EQ(cost->selective_saved_bytes, 2 * sbh / t + lse) << "tp=" << t;
  }
}

// A collective-matmul schedule keeps what the layer without it keeps (TransformerEngine's
// overlapped layers keep the same sharded inputs): the ring's assembled gathers do not
// count whole.
TEST(MemoryModelTest, CollectiveMatmulScheduleKeepsThePlainActivations) {
  const ModelSpec m = *ParseModelSpec("gpt3-1.3b");
  LayerCostOptions options;
  options.predict.hardware = *sim::FindBuiltinHardware("h100-sxm");
  options.schedule = *ParseLayerSchedule("ring-collective-matmul");
  absl::StatusOr<LayerCost> cost =
      MeasureLayerCost(m, LayerKind::kTransformer, {4, 1, true, 1}, options);
  ASSERT_TRUE(cost.ok()) << cost.status();
  EXPECT_EQ(cost->schedule.ToString(), "ring-collective-matmul");
  EXPECT_EQ(cost->activation_bytes, 32 * m.sequence * m.hidden / 4 + 4 * m.sequence * m.heads / 4);
}

TEST(MemoryModelTest, RefusesBadConfigurations) {
  StageFootprint f;
  MemoryConfig c;
  c.stage = 1;
  EXPECT_FALSE(StageMemoryUse(f, c).ok());
  c.stage = 0;
  c.zero_stage = 5;
  EXPECT_FALSE(StageMemoryUse(f, c).ok());
  c.zero_stage = 0;
  f.selective_saved_bytes = 1;  // more than the activations
  EXPECT_FALSE(StageMemoryUse(f, c).ok());
}

}  // namespace
}  // namespace commir::search::plan
