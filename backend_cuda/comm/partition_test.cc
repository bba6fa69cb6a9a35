#include "backend_cuda/comm/partition.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace commir::cuda::comm {
namespace {

using ::testing::ElementsAre;
using Groups = std::vector<std::vector<int64_t>>;

// Mesh (dp=2, tp=4): device = dp * 4 + tp.
TEST(InferPartitionTest, LastAxisGroups) {
  absl::StatusOr<Groups> groups = InferPartition({2, 4}, {4, 5, 6, 7});
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, ElementsAre(ElementsAre(0, 1, 2, 3), ElementsAre(4, 5, 6, 7)));
  EXPECT_EQ(GroupAxesMask({2, 4}, {4, 5, 6, 7}), 2u);
}

TEST(InferPartitionTest, FirstAxisGroups) {
  absl::StatusOr<Groups> groups = InferPartition({2, 4}, {2, 6});
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, ElementsAre(ElementsAre(0, 4), ElementsAre(1, 5), ElementsAre(2, 6),
                                   ElementsAre(3, 7)));
  EXPECT_EQ(GroupAxesMask({2, 4}, {2, 6}), 1u);
}

TEST(InferPartitionTest, AxisGroupOfTwoAxes) {
  // Mesh (a=2, b=2, c=2); group over (a, c) for b = 1: devices 2, 3, 6, 7.
  absl::StatusOr<Groups> groups = InferPartition({2, 2, 2}, {2, 3, 6, 7});
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, ElementsAre(ElementsAre(0, 1, 4, 5), ElementsAre(2, 3, 6, 7)));
}

TEST(InferPartitionTest, AxisGroupWrittenAgainstMeshOrder) {
  // Mesh (dp=2, tp=4), axis = (tp, dp): tp major, so [0, 4, 1, 5, 2, 6, 3, 7]
  // (commir::Mesh::GroupMembers); the partition keeps that order.
  absl::StatusOr<Groups> groups = InferPartition({2, 4}, {0, 4, 1, 5, 2, 6, 3, 7});
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, ElementsAre(ElementsAre(0, 4, 1, 5, 2, 6, 3, 7)));
  // Mesh (a=2, b=3, c=2), axis = (c, a) for b = 2: position p = 2 * c + a; every group of
  // the partition in the same order.
  groups = InferPartition({2, 3, 2}, {4, 10, 5, 11});
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT(*groups, ElementsAre(ElementsAre(0, 6, 1, 7), ElementsAre(2, 8, 3, 9),
                                   ElementsAre(4, 10, 5, 11)));
  // Mesh order for the same axes is another partition order.
  groups = InferPartition({2, 3, 2}, {4, 5, 10, 11});
  ASSERT_TRUE(groups.ok()) << groups.status();
  EXPECT_THAT((*groups)[0], ElementsAre(0, 1, 6, 7));
  // Neither order of the axes lists these.
  EXPECT_FALSE(InferPartition({2, 3, 2}, {4, 11, 5, 10}).ok());
}

TEST(InferPartitionTest, WholeMeshAndSingletons) {
  EXPECT_THAT(*InferPartition({2, 2}, {0, 1, 2, 3}), ElementsAre(ElementsAre(0, 1, 2, 3)));
  EXPECT_THAT(*InferPartition({2, 2}, {3}),
              ElementsAre(ElementsAre(0), ElementsAre(1), ElementsAre(2), ElementsAre(3)));
}

TEST(InferPartitionTest, RejectsNonGroups) {
  EXPECT_FALSE(InferPartition({2, 4}, {5, 4, 6, 7}).ok());  // not in coordinate order
  EXPECT_FALSE(InferPartition({2, 4}, {4, 5}).ok());        // only part of a group
  EXPECT_FALSE(InferPartition({2, 4}, {0, 5}).ok());        // diagonal
  EXPECT_FALSE(InferPartition({2, 4}, {0, 8}).ok());        // outside the mesh
  EXPECT_FALSE(InferPartition({2, 4}, {}).ok());
}

}  // namespace
}  // namespace commir::cuda::comm
