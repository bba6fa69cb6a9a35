// Meshes equal up to renaming (and reordering) their axes: which permutations keep the
// devices' nodes, and layouts that are one plan.
#include "search/mesh_symmetry.h"

#include <vector>

#include "gtest/gtest.h"

namespace commir::search {
namespace {

LayoutCandidate Layout(std::vector<int64_t> sizes, std::vector<AxisList> class_axes) {
  LayoutCandidate layout;
  layout.mesh.sizes = std::move(sizes);
  layout.class_axes = std::move(class_axes);
  return layout;
}

std::vector<int64_t> Key(const LayoutCandidate& layout, int64_t gpus_per_node) {
  return CanonicalLayoutKey(layout, NodeKeepingPermutations(layout.mesh.sizes, gpus_per_node));
}

TEST(MeshSymmetry, OnOneNodeEveryPermutationKeepsTheNodes) {
  EXPECT_TRUE(PermutationKeepsNodes({2, 4}, {1, 0}, 8));
  EXPECT_TRUE(PermutationKeepsNodes({2, 2, 2}, {2, 0, 1}, 8));
  EXPECT_EQ(NodeKeepingPermutations({2, 2, 2}, 8).size(), 6u);
}

TEST(MeshSymmetry, AcrossNodesOnlyPermutationsThatMapNodesToNodes) {
  // 2 nodes of 4: on 2x4 the size-4 axis is inside a node; on 4x2 it spans both.
  EXPECT_FALSE(PermutationKeepsNodes({2, 4}, {1, 0}, 4));
  // 2x2x2 on nodes of 4: the last two axes are inside a node and may swap; the first
  // spans the nodes and may not move inside.
  EXPECT_TRUE(PermutationKeepsNodes({2, 2, 2}, {0, 2, 1}, 4));
  EXPECT_FALSE(PermutationKeepsNodes({2, 2, 2}, {1, 0, 2}, 4));
  EXPECT_EQ(NodeKeepingPermutations({2, 2, 2}, 4).size(), 2u);
  // 2x2 on nodes of 2: swapping puts device 1 (node 0) at 2 (node 1) and device 2 at 1.
  EXPECT_FALSE(PermutationKeepsNodes({2, 2}, {1, 0}, 2));
  // 4x4 on nodes of 8 (the last axis and half the first): swapping sends device 1
  // (node 0) to 4 (node 0) but device 4 (node 0) to 1 and device 8 (node 1) to 2 (node 0).
  EXPECT_FALSE(PermutationKeepsNodes({4, 4}, {1, 0}, 8));
  // Identity always.
  EXPECT_TRUE(PermutationKeepsNodes({4, 4}, {0, 1}, 8));
}

TEST(MeshSymmetry, RenamedAndReorderedAxesAreOneLayout) {
  // {dp=2, tp=4} and {tp=4, dp=2}: class 0 (the batch) over the size-2 axis, class 1
  // (the FFN) over the size-4 one.
  LayoutCandidate dp_tp = Layout({2, 4}, {{"a"}, {"b"}});
  LayoutCandidate tp_dp = Layout({4, 2}, {{"b"}, {"a"}});
  EXPECT_EQ(Key(dp_tp, 8), Key(tp_dp, 8));
  // On 2x2 the two axes' names swapped.
  EXPECT_EQ(Key(Layout({2, 2}, {{"a"}, {"b"}}), 8), Key(Layout({2, 2}, {{"b"}, {"a"}}), 8));
  // Not the same plan: the FFN over the size-2 axis.
  EXPECT_NE(Key(dp_tp, 8), Key(Layout({4, 2}, {{"a"}, {"b"}}), 8));
  // On nodes of 4 the tensor axis inside a node is another plan than across nodes.
  EXPECT_NE(Key(dp_tp, 4), Key(tp_dp, 4));
}

TEST(MeshSymmetry, AClassOverSeveralAxesKeepsTheirOrder) {
  // Class 0 over (a, b): reversing the axes reverses its chunks' order, another layout.
  EXPECT_NE(Key(Layout({2, 2}, {{"a", "b"}, {"a"}}), 8), Key(Layout({2, 2}, {{"a", "b"}, {"b"}}), 8));
  // ... but with the same split over three axes, the third may move.
  EXPECT_EQ(Key(Layout({2, 2, 2}, {{"a", "b"}, {"c"}}), 8),
            Key(Layout({2, 2, 2}, {{"a", "c"}, {"b"}}), 8));
}

}  // namespace
}  // namespace commir::search
