// The partitioner's time prices against closed forms from the H100 SXM datasheet figures
// (sim/hardware.cc: 989 TFLOP/s dense bf16, 67 TFLOP/s f32, 3.35 TB/s HBM, 8 GPUs and
// 50 GB/s of network per GPU per node) and the 360 GB/s bus bandwidth of collectives
// inside a node (../shared/calibration.md).
#include "transforms/sharding/compute_cost.h"

#include "gtest/gtest.h"

namespace commir::sharding {
namespace {

// A bf16 GEMM of 8192^3: 2 * 8192^3 FLOPs at the tensor-core peak (compute-bound: its
// 3 x 128 MiB of operands and result take 0.12 ms of HBM, the FLOPs 1.11 ms).
TEST(ComputeCost, ComputeBoundGemmAtTheTensorCorePeak) {
  OpCost gemm{2.0 * 8192 * 8192 * 8192, 3.0 * 8192 * 8192 * 2, 0};
  EXPECT_NEAR(ComputeSeconds(gemm, ElementType::kBF16, 1), 2.0 * 8192 * 8192 * 8192 / 989e12, 1e-12);
  // Split into 8 blocks: an eighth on each device.
  EXPECT_NEAR(ComputeSeconds(gemm, ElementType::kBF16, 8), 2.0 * 8192 * 8192 * 8192 / 989e12 / 8,
              1e-12);
  // f32 runs on the plain f32 peak (no TF32 unless the hardware says so), 15x slower.
  EXPECT_NEAR(ComputeSeconds(gemm, ElementType::kF32, 1), 2.0 * 8192 * 8192 * 8192 / 67e12, 1e-12);
}

// An elementwise add of two 64 Mi-element f32 tensors: 768 MiB of traffic, memory-bound.
TEST(ComputeCost, ElementwiseOpsAreMemoryBound) {
  const double elements = 64.0 * 1024 * 1024;
  OpCost add{elements, 3 * elements * 4, 0};
  EXPECT_NEAR(ComputeSeconds(add, ElementType::kF32, 1), 3 * elements * 4 / 3.35e12, 1e-12);
  // In link bytes: the seconds times 360 GB/s.
  EXPECT_NEAR(ComputeCostBytes(add, ElementType::kF32, 4), 3 * elements * 4 / 3.35e12 / 4 * 360e9,
              1e-3);
}

TEST(ComputeCost, NoWorkCostsNothing) {
  EXPECT_EQ(ComputeSeconds(OpCost{}, ElementType::kBF16, 1), 0);
}

// Device ids run over the mesh's axes in order, the last fastest; nodes hold 8
// consecutive ids. On (dp=2, tp=8) a tp group is one node, a dp group spans two; on a
// 16-wide tp axis every group spans two.
TEST(ComputeCost, CollectivesSpanningNodesPayTheNetworkRate) {
  const Mesh two_nodes("m", {{"dp", 2, {}}, {"tp", 8, {}}});
  EXPECT_EQ(CollectiveByteWeight(two_nodes, {"tp"}), 1);
  EXPECT_DOUBLE_EQ(CollectiveByteWeight(two_nodes, {"dp"}), 360e9 / 50e9);
  EXPECT_DOUBLE_EQ(CollectiveByteWeight(two_nodes, {"dp", "tp"}), 360e9 / 50e9);
  const Mesh wide("m", {{"tp", 16, {}}});
  EXPECT_DOUBLE_EQ(CollectiveByteWeight(wide, {"tp"}), 360e9 / 50e9);
  const Mesh one_node("m", {{"dp", 2, {}}, {"tp", 4, {}}});
  EXPECT_EQ(CollectiveByteWeight(one_node, {"dp"}), 1);
  EXPECT_EQ(CollectiveByteWeight(one_node, {"dp", "tp"}), 1);
  // Groups of one axis are not all alike: on (a=2, b=6) the b group of devices 0-5 sits
  // on node 0, that of 6-11 spans nodes 0 and 1.
  const Mesh uneven("m", {{"a", 2, {}}, {"b", 6, {}}});
  EXPECT_DOUBLE_EQ(CollectiveByteWeight(uneven, {"b"}), 360e9 / 50e9);
  // A group of one moves nothing.
  const Mesh single("m", {{"dp", 1, {}}, {"tp", 16, {}}});
  EXPECT_EQ(CollectiveByteWeight(single, {"dp"}), 1);
}

}  // namespace
}  // namespace commir::sharding
