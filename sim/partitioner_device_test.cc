// The partitioner prices time with its own copy of the default device's figures
// (transforms/sharding/compute_cost.h: it sits below the sim); they must be the sim's
// h100-sxm, or the partitioner and the sim would rank plans by different machines.
#include "gtest/gtest.h"
#include "sim/gemm_time.h"
#include "sim/hardware.h"
#include "transforms/sharding/compute_cost.h"

namespace commir::sim {
namespace {

TEST(PartitionerDevice, IsTheSimsDefaultHardware) {
  const HardwareSpec* hw = FindBuiltinHardware(kDefaultHardware);
  ASSERT_NE(hw, nullptr);
  const sharding::PartitionerDevice& device = sharding::kPartitionerDevice;
  EXPECT_EQ(device.peak_flops_bf16, MatmulPeakFlops(*hw, ElementType::kBF16));
  EXPECT_EQ(device.peak_flops_bf16, MatmulPeakFlops(*hw, ElementType::kF16));
  EXPECT_EQ(device.peak_flops_f32, MatmulPeakFlops(*hw, ElementType::kF32));
  EXPECT_EQ(device.hbm_bandwidth, hw->hbm_bandwidth);
  EXPECT_EQ(device.gpus_per_node, hw->gpus_per_node);
  EXPECT_EQ(device.network_bandwidth_per_gpu, hw->network_bandwidth_per_gpu);
}

// Its prices follow: a bf16 GEMM's seconds at the sim's tensor-core peak.
TEST(PartitionerDevice, PricesAGemmAtTheSimsPeak) {
  const HardwareSpec* hw = FindBuiltinHardware(kDefaultHardware);
  ASSERT_NE(hw, nullptr);
  OpCost gemm{2.0 * 4096 * 4096 * 4096, 3.0 * 4096 * 4096 * 2, 0};
  EXPECT_DOUBLE_EQ(sharding::ComputeSeconds(gemm, ElementType::kBF16, 1),
                   gemm.flops / MatmulPeakFlops(*hw, ElementType::kBF16));
}

}  // namespace
}  // namespace commir::sim
