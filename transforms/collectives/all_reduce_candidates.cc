#include "transforms/collectives/all_reduce_candidates.h"

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/element_type.h"

namespace commir::collectives {
namespace {

bool IsCandidate(const Operation& op) {
  if (!op.Is(OpKind::kAllReduce) || op.num_operands() != 1) return false;
  // A stream chosen by an index value is known only when the op runs: one combined
  // collective could not take the streams of several.
  if (op.stream_operand() != nullptr) return false;
  const Value* x = op.operand(0);
  if (x->is_literal() || !x->type().is_tensor() || x->type().num_elements() <= 0) return false;
  return !op.result(0)->use_empty();
}

// What one combined all_reduce must agree on with each member: the element type (one
// buffer), the reduction (default `sum` made explicit), the axes, and every other
// attribute as written (a stream, a remat mark), in a canonical order.
std::string KeyText(const Operation& op) {
  const Attribute* axis = op.attrs().Find("axis");
  std::vector<std::string> rest;
  for (const auto& [name, value] : op.attrs().entries()) {
    if (name == "axis" || name == "reduce") continue;
    rest.push_back(absl::StrCat(name, "=", value.ToString()));
  }
  std::sort(rest.begin(), rest.end());
  return absl::StrCat(ElementTypeName(op.operand(0)->type().element_type()), "|",
                      op.EnumAttr("reduce"), "|",
                      axis == nullptr ? "" : FormatAxes(axis->axes()), "|",
                      absl::StrJoin(rest, ","));
}

}  // namespace

Operation* AncestorInBlock(Operation* op, const Block& block) {
  while (op != nullptr && op->parent_block() != &block) op = op->parent_op();
  return op;
}

void ForEachValueRead(const Operation& op, absl::FunctionRef<void(Value*)> fn) {
  for (Value* v : op.all_operands()) fn(v);
  for (int r = 0; r < op.num_regions(); ++r) {
    for (Operation* nested : *op.region(r)) ForEachValueRead(*nested, fn);
  }
}

AllReduceCandidates CollectAllReduceCandidates(const Block& block) {
  // Program positions, and each op's collective round (see the header).
  std::vector<Operation*> ops;
  ops.reserve(block.size());
  absl::flat_hash_map<const Operation*, int> position;
  for (Operation* op : block) {
    position[op] = static_cast<int>(ops.size());
    ops.push_back(op);
  }
  std::vector<char> candidate(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) candidate[i] = IsCandidate(*ops[i]) ? 1 : 0;
  // The op of the block that makes `v` (null: an argument, a literal or a value of an
  // enclosing block).
  auto producer = [&](Value* v) -> Operation* {
    if (v->kind() != Value::Kind::kResult) return nullptr;
    return AncestorInBlock(v->defining_op(), block);
  };
  std::vector<int64_t> round(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i) {
    int64_t r = 0;
    ForEachValueRead(*ops[i], [&](Value* v) {
      Operation* p = producer(v);
      if (p == nullptr || p == ops[i]) return;  // made outside the block, or inside this op
      const int j = position.at(p);
      r = std::max(r, round[j] + candidate[j]);
    });
    round[i] = r;
  }
  std::vector<int> order(ops.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return round[a] < round[b]; });
  std::vector<int> in_round_order(ops.size());
  for (size_t k = 0; k < order.size(); ++k) in_round_order[order[k]] = static_cast<int>(k);

  AllReduceCandidates result;
  absl::flat_hash_map<std::string, int64_t> keys;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!candidate[i]) continue;
    Operation* op = ops[i];
    BucketCandidate c;
    Operation* p = producer(op->operand(0));
    if (p == nullptr) {
      c.ready = -1;
    } else if (candidate[static_cast<size_t>(position.at(p))]) {
      // All-reducing an all_reduce's result: the operand exists only once that
      // all_reduce (or its bucket) has run, which is no earlier than its first reader,
      // this op. Its own position says so; the producer's would let the two share a
      // bucket.
      c.ready = in_round_order[i];
    } else {
      c.ready = in_round_order[position.at(p)];
    }
    c.needed = static_cast<int>(ops.size());
    for (Operation* user : op->result(0)->users()) {
      Operation* reader = AncestorInBlock(user, block);
      if (reader != nullptr) c.needed = std::min(c.needed, in_round_order[position.at(reader)]);
    }
    const Type type = op->operand(0)->type();
    c.bytes = static_cast<double>(type.num_elements()) *
              ElementTypeByteWidth(type.element_type());
    c.key = keys.try_emplace(KeyText(*op), static_cast<int64_t>(keys.size())).first->second;
    result.ops.push_back(op);
    result.candidates.push_back(c);
  }
  return result;
}

}  // namespace commir::collectives
