#include "search/mesh_symmetry.h"

#include <algorithm>
#include <numeric>
#include <string>

#include "absl/container/flat_hash_map.h"

namespace commir::search {

bool PermutationKeepsNodes(const std::vector<int64_t>& sizes, const std::vector<int>& order,
                           int64_t gpus_per_node) {
  int64_t devices = 1;
  for (int64_t s : sizes) devices *= s;
  if (gpus_per_node <= 0 || devices <= gpus_per_node) return true;  // one node
  const size_t k = sizes.size();
  std::vector<int64_t> permuted(k);
  for (size_t i = 0; i < k; ++i) permuted[i] = sizes[order[i]];
  // node of a device -> node of its image, and back: both must be functions.
  absl::flat_hash_map<int64_t, int64_t> forward, backward;
  std::vector<int64_t> index(k);
  for (int64_t d = 0; d < devices; ++d) {
    int64_t rest = d;
    for (size_t i = k; i-- > 0;) {
      index[i] = rest % sizes[i];
      rest /= sizes[i];
    }
    int64_t image = 0;
    for (size_t i = 0; i < k; ++i) image = image * permuted[i] + index[order[i]];
    const int64_t from = d / gpus_per_node, to = image / gpus_per_node;
    auto [f, f_new] = forward.try_emplace(from, to);
    auto [b, b_new] = backward.try_emplace(to, from);
    if (f->second != to || b->second != from) return false;
  }
  return true;
}

std::vector<std::vector<int>> NodeKeepingPermutations(const std::vector<int64_t>& sizes,
                                                      int64_t gpus_per_node) {
  std::vector<int> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<std::vector<int>> out;
  do {
    if (PermutationKeepsNodes(sizes, order, gpus_per_node)) out.push_back(order);
  } while (std::next_permutation(order.begin(), order.end()));
  return out;
}

std::vector<int64_t> CanonicalLayoutKey(const LayoutCandidate& layout,
                                        const std::vector<std::vector<int>>& symmetries) {
  const std::vector<int64_t>& sizes = layout.mesh.sizes;
  const int k = static_cast<int>(sizes.size());
  const std::vector<std::string> names = layout.mesh.axis_names();
  // Per class, its axes as indices in mesh order.
  std::vector<std::vector<int>> class_axes;
  for (const AxisList& axes : layout.class_axes) {
    std::vector<int>& indices = class_axes.emplace_back();
    for (const std::string& axis : axes) {
      indices.push_back(static_cast<int>(std::find(names.begin(), names.end(), axis) - names.begin()));
    }
  }
  std::vector<int64_t> best;
  std::vector<int> position(k);
  for (const std::vector<int>& order : symmetries) {
    for (int i = 0; i < k; ++i) position[order[i]] = i;
    bool keeps_order = true;
    std::vector<int64_t> key = {k};
    for (int i = 0; i < k; ++i) key.push_back(sizes[order[i]]);
    for (const std::vector<int>& axes : class_axes) {
      int64_t mask = 0;
      for (size_t j = 0; j < axes.size(); ++j) {
        if (j > 0 && position[axes[j - 1]] > position[axes[j]]) keeps_order = false;
        mask |= int64_t{1} << position[axes[j]];
      }
      key.push_back(mask);
    }
    if (!keeps_order) continue;
    if (best.empty() || key < best) best = std::move(key);
  }
  return best;
}

}  // namespace commir::search
