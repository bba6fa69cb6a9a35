#include "sim/placement.h"

#include <vector>

#include "gtest/gtest.h"

namespace commir::sim {
namespace {

GroupPlacement Place(std::vector<int64_t> devices, int64_t gpus_per_node = 8) {
  absl::StatusOr<GroupPlacement> p = PlaceGroup(devices, gpus_per_node);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : GroupPlacement{};
}

TEST(PlacementTest, RowMajorDevicesFillNodesInOrder) {
  EXPECT_EQ(NodeOfDevice(0, 8), 0);
  EXPECT_EQ(NodeOfDevice(7, 8), 0);
  EXPECT_EQ(NodeOfDevice(8, 8), 1);
  EXPECT_EQ(NodeOfDevice(9, 4), 2);
}

TEST(PlacementTest, TensorParallelGroupStaysInANode) {
  GroupPlacement p = Place({0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(p.within_one_node());
  EXPECT_EQ(p.num_devices, 8);
  EXPECT_EQ(p.num_nodes, 1);
  EXPECT_EQ(p.max_gpus_per_node, 8);
}

TEST(PlacementTest, DataParallelGroupOfAMesh2x8SpansTwoNodes) {
  // mesh (dp=2, tp=8): the dp group of device 3 is {3, 11}.
  GroupPlacement p = Place({3, 11});
  EXPECT_FALSE(p.within_one_node());
  EXPECT_EQ(p.num_nodes, 2);
  EXPECT_EQ(p.max_gpus_per_node, 1);
}

TEST(PlacementTest, GroupStraddlingANodeBoundaryInAnyOrder) {
  GroupPlacement p = Place({9, 6, 8, 7, 10});
  EXPECT_EQ(p.num_nodes, 2);
  EXPECT_EQ(p.max_gpus_per_node, 3);  // 8, 9, 10
  GroupPlacement four = Place({0, 1, 2, 3, 4, 5, 6, 7}, 4);
  EXPECT_EQ(four.num_nodes, 2);
  EXPECT_EQ(four.max_gpus_per_node, 4);
}

TEST(PlacementTest, SingleNodeGroup) {
  GroupPlacement p = SingleNodeGroup(4);
  EXPECT_EQ(p.num_devices, 4);
  EXPECT_TRUE(p.within_one_node());
  EXPECT_EQ(p.max_gpus_per_node, 4);
}

TEST(PlacementTest, BadGroupsAreErrors) {
  EXPECT_EQ(PlaceGroup({}, 8).status().message(), "a device group needs at least one device");
  EXPECT_EQ(PlaceGroup(std::vector<int64_t>{0, 1}, 0).status().message(),
            "gpus per node must be at least 1, got 0");
  EXPECT_EQ(PlaceGroup(std::vector<int64_t>{1, -2}, 8).status().message(), "negative device id -2");
  EXPECT_EQ(PlaceGroup(std::vector<int64_t>{1, 2, 1}, 8).status().message(),
            "device 1 appears twice in a group");
}

}  // namespace
}  // namespace commir::sim
