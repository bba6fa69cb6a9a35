// Layouts that are the same plan on meshes that differ only in the names and order of
// their axes: {dp=2, tp=4} splitting the batch over dp and the FFN over tp is
// {tp=4, dp=2} with the same splits, and on a 2x2 mesh `x.0@a w.1@b` is `x.0@b w.1@a`
// with the axes renamed. The search evaluates one of them (the first in enumeration
// order) and counts the others as merged.
//
// Renaming axes changes which devices share a node: devices are numbered row-major
// (last axis fastest) and a node is `gpus_per_node` consecutive devices, which is all
// the sim knows of the topology (sim/hardware.h: inside a node, between nodes). A
// permutation of the axes is a symmetry only when the device relabelling it makes maps
// every node onto a node; then every collective spans the same links and the two plans
// cost the same. On one node every permutation is one; on 2 nodes of 4 a 2x4 mesh
// (the size-4 axis inside a node) is not the 4x2 one.
//
// A class split over several axes keeps their order (its chunk index is row-major over
// them): a permutation that reverses it gives another chunk order, which is another
// layout, not a renaming.
#ifndef COMMIR_SEARCH_MESH_SYMMETRY_H_
#define COMMIR_SEARCH_MESH_SYMMETRY_H_

#include <cstdint>
#include <vector>

#include "search/layout_space.h"

namespace commir::search {

// Whether laying the axes of a mesh of `sizes` out in the order `order` (new axis i is
// old axis order[i]) maps each node of `gpus_per_node` consecutive devices onto a node.
bool PermutationKeepsNodes(const std::vector<int64_t>& sizes, const std::vector<int>& order,
                           int64_t gpus_per_node);

// The orders (identity first) that PermutationKeepsNodes accepts for a mesh of `sizes`:
// computed once per mesh, since the check walks every device.
std::vector<std::vector<int>> NodeKeepingPermutations(const std::vector<int64_t>& sizes,
                                                      int64_t gpus_per_node);

// The same key for two layouts exactly when one is the other with its mesh's axes
// permuted by a symmetry (above): the smallest encoding (axis sizes, then per class the
// axes that split it) over the permutations `symmetries` (NodeKeepingPermutations of the
// layout's mesh) that keep the order of each class's axes.
std::vector<int64_t> CanonicalLayoutKey(const LayoutCandidate& layout,
                                        const std::vector<std::vector<int>>& symmetries);

}  // namespace commir::search

#endif  // COMMIR_SEARCH_MESH_SYMMETRY_H_
