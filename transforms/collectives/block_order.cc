#include "transforms/collectives/block_order.h"

#include <functional>
#include <memory>
#include <queue>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "transforms/collectives/all_reduce_candidates.h"

namespace commir::collectives {

absl::Status RelinkInDependenceOrder(Block& block, const std::vector<OrderNode>& nodes) {
  absl::flat_hash_map<const Operation*, int> node_of;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (const Operation* op : nodes[n].ops) node_of[op] = static_cast<int>(n);
  }
  if (node_of.size() != block.size()) {
    return absl::InternalError(absl::StrFormat(
        "relinking a block of %d ops from nodes holding %d", block.size(), node_of.size()));
  }
  std::vector<std::vector<int>> readers(nodes.size());
  std::vector<int> waiting(nodes.size(), 0);
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (const Operation* op : nodes[n].ops) {
      ForEachValueRead(*op, [&](Value* v) {
        if (v->kind() != Value::Kind::kResult) return;
        Operation* p = AncestorInBlock(v->defining_op(), block);
        if (p == nullptr) return;
        const int from = node_of.at(p);
        if (from == static_cast<int>(n)) return;
        readers[static_cast<size_t>(from)].push_back(static_cast<int>(n));
        ++waiting[n];
      });
    }
  }
  using Entry = std::tuple<int64_t, int64_t, int>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> ready;
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (waiting[n] == 0) ready.emplace(nodes[n].position, nodes[n].tie, static_cast<int>(n));
  }
  std::vector<int> order;
  order.reserve(nodes.size());
  while (!ready.empty()) {
    const int n = std::get<2>(ready.top());
    ready.pop();
    order.push_back(n);
    for (int r : readers[static_cast<size_t>(n)]) {
      if (--waiting[static_cast<size_t>(r)] == 0) {
        ready.emplace(nodes[static_cast<size_t>(r)].position, nodes[static_cast<size_t>(r)].tie, r);
      }
    }
  }
  if (order.size() != nodes.size()) {
    return absl::InternalError("the ops of a block read each other's results in a cycle");
  }
  for (int n : order) {
    for (Operation* op : nodes[static_cast<size_t>(n)].ops) block.Append(block.Remove(op));
  }
  return absl::OkStatus();
}

}  // namespace commir::collectives
