#include "transforms/autodiff/forward_copy.h"

#include <deque>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "commir/fingerprint.h"

namespace commir {
namespace {

// Whether `copy` returns what `op` returns, and maybe more: autodiff's copy of a
// differentiated attention also returns the log-sum-exp its backward reads.
bool ResultsExtend(const Operation& op, const Operation& copy) {
  if (copy.num_results() < op.num_results()) return false;
  for (int i = 0; i < op.num_results(); ++i) {
    if (copy.result(i)->type() != op.result(i)->type()) return false;
  }
  return true;
}

const Operation* TopLevel(const Operation* op) {
  while (op->parent_op() != nullptr) op = op->parent_op();
  return op;
}

// The top-level ops of `function` that its first `results` returned values are computed
// from (operands read inside regions included).
absl::flat_hash_set<const Operation*> ComputingResults(const Function& function, int results) {
  absl::flat_hash_set<const Operation*> found;
  const Operation* ret = function.body()->terminator();
  if (ret == nullptr || !ret->Is(OpKind::kReturn)) return found;
  std::vector<const Operation*> work;
  auto reach = [&](const Value* value) {
    if (value->kind() != Value::Kind::kResult) return;
    const Operation* op = TopLevel(value->defining_op());
    if (op->parent_block() == function.body() && found.insert(op).second) work.push_back(op);
  };
  for (int i = 0; i < results && i < ret->num_operands(); ++i) reach(ret->operand(i));
  while (!work.empty()) {
    const Operation* op = work.back();
    work.pop_back();
    for (const Value* operand : op->all_operands()) reach(operand);
    for (int r = 0; r < op->num_regions(); ++r) {
      WalkOps(op->region(r), [&](Operation* inner) {
        for (const Value* operand : inner->all_operands()) reach(operand);
      });
    }
  }
  return found;
}

}  // namespace

bool ForwardCopy::Recomputes(const Operation* op) const {
  return forward_part.contains(TopLevel(op));
}

ForwardCopy MatchForwardCopy(const Function& forward, const Function& gradient) {
  ForwardCopy copy;
  // The values matched so far, numbered: the same number in both functions is the same
  // forward value.
  ValueNumbers numbers;
  int64_t next = 0;
  const Block& fwd = *forward.body();
  const Block& grad = *gradient.body();
  // The gradient function's leading arguments are the forward's.
  for (int i = 0; i < fwd.num_arguments(); ++i) {
    numbers[fwd.argument(i)] = next;
    if (i < grad.num_arguments()) {
      numbers[grad.argument(i)] = next;
      copy.values[grad.argument(i)] = fwd.argument(i);
    }
    ++next;
  }
  // The forward's ops by what they compute; identical ones queue in program order.
  absl::flat_hash_map<std::string, std::deque<const Operation*>> by_key;
  for (const Operation* op : fwd) {
    if (op->def().Has(kTerminator)) continue;
    by_key[OpStructureKey(*op, numbers)].push_back(op);
    for (const Value* result : op->results()) numbers[result] = next++;
  }
  for (int i = fwd.num_arguments(); i < grad.num_arguments(); ++i) {
    numbers[grad.argument(i)] = next++;
  }
  for (const Operation* op : grad) {
    if (op->def().Has(kTerminator)) continue;
    const Operation* twin = nullptr;
    if (auto it = by_key.find(OpStructureKey(*op, numbers)); it != by_key.end()) {
      std::deque<const Operation*>& candidates = it->second;
      for (auto c = candidates.begin(); c != candidates.end(); ++c) {
        if (!ResultsExtend(**c, *op)) continue;
        twin = *c;
        candidates.erase(c);
        break;
      }
    }
    for (int i = 0; i < op->num_results(); ++i) {
      // Results beyond the forward op's (an attention's log-sum-exp) are the copy's own.
      if (twin == nullptr || i >= twin->num_results()) {
        numbers[op->result(i)] = next++;
        continue;
      }
      numbers[op->result(i)] = numbers.at(twin->result(i));
      copy.values[op->result(i)] = twin->result(i);
    }
    if (twin != nullptr) copy.ops[op] = twin;
  }
  copy.forward_part =
      ComputingResults(gradient, static_cast<int>(forward.result_types().size()));
  for (const auto& [op, twin] : copy.ops) copy.forward_part.insert(op);
  return copy;
}

}  // namespace commir
