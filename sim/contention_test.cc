// The hardware a kernel sees beside communication, against the wave and roofline
// arithmetic worked out by hand.
#include "sim/contention.h"

#include "gtest/gtest.h"
#include "sim/op_time.h"

namespace commir::sim {
namespace {

const HardwareSpec& H100() { return *FindBuiltinHardware("h100-sxm"); }

// bf16 512 x 8192 times 8192 x 7680 (compute-bound: 64 GFLOP against 142 MB). Its tiles,
// per candidate: 128x256: 4 x 30 = 120; 128x128: 4 x 60 = 240; 256x128: 2 x 60 = 120 (half
// padding). On 132 SMs the best takes one wave of 128x256 tiles (or two of 128x128: the
// same work per SM). Beside an NCCL kernel of 32 SMs, 100 are left: 128x256 needs 2 waves
// (2 x 32768 tile elements per SM), 128x128 3 waves (3 x 16384), 256x128 2 waves
// (2 x 32768): the best does 49152 elements per SM against 32768, 1.5 times the time.
TEST(ContentionTest, AGemmBesideAnNcclKernelRunsItsWavesOnTheSmsLeft) {
  const HardwareSpec& hw = H100();
  const int64_t m = 512, n = 7680, k = 8192;
  const double flops = 2.0 * m * n * k;
  const double bytes = 2.0 * (m * k + k * n + m * n);
  const double alone = MatmulTime(hw, ElementType::kBF16, 1, m, n, flops, bytes);
  const HardwareSpec beside = HardwareBeside(hw, {32, 0});
  EXPECT_EQ(beside.sm_count, 100);
  EXPECT_DOUBLE_EQ(beside.peak_flops_bf16, 989e12 * 100 / 132);
  const double slowed = MatmulTime(beside, ElementType::kBF16, 1, m, n, flops, bytes);
  const double launch = hw.kernel_launch_overhead_s;
  EXPECT_NEAR(slowed - launch, 1.5 * (alone - launch), 1e-12);
  // One wave on 132 SMs is one wave on 120: the same GEMM beside 12 SMs is not slower.
  const double beside12 =
      MatmulTime(HardwareBeside(hw, {12, 0}), ElementType::kBF16, 1, m, n, flops, bytes);
  EXPECT_NEAR(beside12, alone, 1e-12);
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
  // A compute-bound GEMM does not notice the same load (the roofline's compute side).
  const int64_t m = 8192, n = 8192, k = 8192;
  const double flops = 2.0 * m * n * k, gemm_bytes = 2.0 * 3 * m * n;
  EXPECT_DOUBLE_EQ(MatmulTime(beside, ElementType::kBF16, 1, m, n, flops, gemm_bytes),
                   MatmulTime(hw, ElementType::kBF16, 1, m, n, flops, gemm_bytes));
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
