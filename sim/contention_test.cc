// The hardware a kernel sees beside communication, against the wave and roofline
// arithmetic worked out by hand.
#include "sim/contention.h"

#include <algorithm>

#include "gtest/gtest.h"
#include "sim/gemm_time.h"
#include "sim/op_time.h"

namespace commir::sim {
namespace {

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }

// bf16 512 x 8192 times 8192 x 7680 (compute-bound: 64 GFLOP against 142 MB). Beside an
// NCCL kernel of 32 SMs the GEMM has 100 SMs, each as fast as before: the hardware it sees
// is the GPU with 100 SMs, and its time is the GEMM heuristic's plan on 100 SMs. With
// 128x256 tiles (4 x 30 = 120 CTAs) that is two waves where 132 SMs need one.
GemmShape ContentionShape() {
  GemmShape shape;
  shape.m = 512;
  shape.n = 7680;
  shape.k = 8192;
  shape.operand_bytes = 2.0 * (512.0 * 8192 + 8192.0 * 7680);
  return shape;
}

TEST(ContentionTest, AGemmBesideAnNcclKernelRunsItsWavesOnTheSmsLeft) {
  const HardwareSpec& hw = H100();
  const GemmShape shape = ContentionShape();
  const HardwareSpec beside = HardwareBeside(hw, {32, 0});
  EXPECT_EQ(beside.sm_count, 100);
  EXPECT_DOUBLE_EQ(beside.peak_flops_bf16, 989e12 * 100 / 132);
  EXPECT_DOUBLE_EQ(beside.gemm_operand_bandwidth, hw.gemm_operand_bandwidth * 100 / 132);
  absl::StatusOr<double> alone = GemmTime(hw, shape);
  absl::StatusOr<double> slowed = GemmTime(beside, shape);
  absl::StatusOr<GemmPlan> on_100 = PlanGemm(hw, shape, 100);
  ASSERT_TRUE(alone.ok() && slowed.ok() && on_100.ok());
  EXPECT_NEAR(*slowed, on_100->time_s, 1e-12);
  // 128x256 without split-K: one wave on 132 SMs, two on 100.
  const GemmTile big{128, 256};
  const double one_wave = GemmCandidateTime(hw, shape, 132, big, 1);
  const double two_waves = GemmCandidateTime(hw, shape, 100, big, 1);
  const double launch = hw.kernel_launch_overhead_s;
  EXPECT_GT(two_waves - launch, 1.9 * (one_wave - launch - 2 * hw.gemm_wave_latency_s));
  EXPECT_GT(*slowed, 1.3 * *alone);
  // One wave on 132 SMs is one wave on 120 for those tiles: beside 12 SMs it is no slower.
  EXPECT_NEAR(GemmCandidateTime(HardwareBeside(hw, {12, 0}), shape, 120, big, 1), one_wave,
              1e-12);
}

// A memory-bound kernel gets the HBM bandwidth the transfer leaves: bytes / (HBM - load).
TEST(ContentionTest, TrafficTakesHbmBandwidthFromAMemoryBoundKernel) {
  const HardwareSpec& hw = H100();
  const double bytes = 1e9;
  const double load = 0.75e12;  // a copy-engine ring step: 375 GB/s read + 375 written
  const HardwareSpec beside = HardwareBeside(hw, {0, load});
  EXPECT_EQ(beside.sm_count, 132);
  EXPECT_DOUBLE_EQ(beside.peak_flops_bf16, hw.peak_flops_bf16);
  EXPECT_NEAR(MemoryBoundTime(beside, 0, bytes) - hw.kernel_launch_overhead_s,
              bytes / (3.35e12 - 0.75e12), 1e-15);
  // A compute-bound GEMM (8192^3: 1.1 TFLOP against 402 MB) keeps its main loop; of its
  // time only the last wave's epilogue, which stores that wave's tiles to HBM after the
  // last main loop, waits on the bandwidth the load leaves (gemm_time.h).
  GemmShape big;
  big.m = big.n = big.k = 8192;
  big.operand_bytes = 2.0 * 2 * 8192.0 * 8192;
  absl::StatusOr<double> with_load = GemmTime(beside, big);
  absl::StatusOr<double> without = GemmTime(hw, big);
  absl::StatusOr<GemmPlan> plan = PlanGemm(hw, big, 132);
  absl::StatusOr<GemmPlan> plan_beside = PlanGemm(beside, big, 132);
  ASSERT_TRUE(with_load.ok() && without.ok() && plan.ok() && plan_beside.ok());
  // The same kernel either way: no split-K (K is long enough for full-width tiles).
  ASSERT_EQ(plan->split_k, 1);
  ASSERT_EQ(plan_beside->split_k, 1);
  ASSERT_EQ(plan_beside->tile.m, plan->tile.m);
  ASSERT_EQ(plan_beside->tile.n, plan->tile.n);
  // Its whole HBM traffic (A, B, bf16 C) at the bandwidth left is far below its time
  // without the waves' latencies: the roofline's compute side holds beside the load.
  const double traffic = big.operand_bytes + 8192.0 * 8192 * 2;
  ASSERT_LT(traffic / (3.35e12 - load),
            0.5 * (*without - hw.kernel_launch_overhead_s - plan->waves * hw.gemm_wave_latency_s));
  // Last wave: min(CTAs, 132) tiles of TM x TN bf16 stored at 3.35e12, then at 2.6e12.
  const double last_stores =
      std::min(plan->ctas, 132.0) * plan->tile.m * plan->tile.n * 2.0;
  EXPECT_NEAR(*with_load - *without, last_stores / (3.35e12 - load) - last_stores / 3.35e12,
              1e-12);
  EXPECT_LT(*with_load - *without, 1e-3 * *without) << "a compute-bound GEMM barely notices";
}

TEST(ContentionTest, LoadsBeyondTheGpuLeaveOneSmAndAShareOfHbm) {
  const HardwareSpec& hw = H100();
  const HardwareSpec beside = HardwareBeside(hw, {500, 1e15});
  EXPECT_EQ(beside.sm_count, 1);
  EXPECT_DOUBLE_EQ(beside.peak_flops_bf16, 989e12 / 132);
  EXPECT_DOUBLE_EQ(beside.hbm_bandwidth, kMinHbmShare * 3.35e12);
  const HardwareSpec none = HardwareBeside(hw, {0, 0});
  EXPECT_EQ(none.sm_count, hw.sm_count);
  EXPECT_EQ(none.hbm_bandwidth, hw.hbm_bandwidth);
}

}  // namespace
}  // namespace commir::sim
