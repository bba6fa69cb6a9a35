#include "search/union_find.h"

#include <vector>

#include "gtest/gtest.h"

namespace commir::search {
namespace {

// The partition of 0..n-1 as the smallest member of each id's set, for comparing with a
// partition written out by hand.
std::vector<int> SmallestMembers(UnionFind& sets) {
  std::vector<int> smallest(sets.size());
  for (int i = 0; i < sets.size(); ++i) {
    smallest[i] = i;
    for (int j = 0; j < i; ++j) {
      if (sets.Same(i, j)) {
        smallest[i] = j;
        break;
      }
    }
  }
  return smallest;
}

TEST(UnionFind, JoinsTransitivelyAndKeepsTheFirstRepresentative) {
  UnionFind sets;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(sets.Add(), i);
  // {0, 3, 5}, {1, 6}, {2}, {4, 7} by hand.
  EXPECT_EQ(sets.Union(3, 5), 3);
  EXPECT_EQ(sets.Union(0, 5), 0);  // 0's representative stays
  EXPECT_EQ(sets.Union(6, 1), 6);
  EXPECT_EQ(sets.Union(7, 4), 7);
  EXPECT_EQ(sets.Union(5, 0), 0);  // already one set: nothing changes
  EXPECT_EQ(SmallestMembers(sets), (std::vector<int>{0, 1, 2, 0, 4, 0, 1, 4}));
  EXPECT_EQ(sets.Find(5), 0);
  EXPECT_EQ(sets.Find(1), 6);
  EXPECT_EQ(sets.Find(2), 2);
}

TEST(UnionFind, LongChainsResolveToOneRepresentative) {
  // Each union hangs the chain so far under a new id: a path of 10^5 before halving.
  constexpr int kN = 100000;
  UnionFind sets;
  sets.Add();
  for (int i = 1; i < kN; ++i) sets.Union(sets.Add(), i - 1);
  EXPECT_EQ(sets.Find(0), kN - 1);
  for (int i = 0; i < kN; i += 997) EXPECT_EQ(sets.Find(i), kN - 1);
  EXPECT_TRUE(sets.Same(0, kN / 2));
}

}  // namespace
}  // namespace commir::search
