// Disjoint sets over dense integer ids: the union-find that both dimension analyses of
// the search build on. FindDimClasses (dim_classes.h) joins value dimensions with the op
// factors they are made of; the shrinker (shrink.h) joins the atoms those dimensions
// factor into. Each keeps its own facts per id (sizes, gcds, whether it may split) and
// asks this structure only which ids are one.
#ifndef COMMIR_SEARCH_UNION_FIND_H_
#define COMMIR_SEARCH_UNION_FIND_H_

#include <vector>

namespace commir::search {

class UnionFind {
 public:
  // A new set holding only the returned id (ids are 0, 1, 2, ... in order).
  int Add() {
    parent_.push_back(static_cast<int>(parent_.size()));
    return parent_.back();
  }

  // The representative of x's set. Path halving keeps later finds short.
  int Find(int x) {
    while (parent_[x] != x) {
      parent_[x] = parent_[parent_[x]];
      x = parent_[x];
    }
    return x;
  }

  // Joins the sets of a and b; the representative of a's set represents the union (the
  // shrinker merges b's facts into a's). Returns it.
  int Union(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[b] = a;
    return a;
  }

  bool Same(int a, int b) { return Find(a) == Find(b); }

  int size() const { return static_cast<int>(parent_.size()); }

 private:
  std::vector<int> parent_;
};

}  // namespace commir::search

#endif  // COMMIR_SEARCH_UNION_FIND_H_
