#include "transforms/autodiff/remat.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace commir {
namespace {

bool IsNorm(const Operation& op) {
  return op.Is(OpKind::kLayerNorm) || op.Is(OpKind::kRmsNorm);
}

// Whether `target` is computed, transitively, from `source` (within one flat body).
bool Reaches(const Value* source, const Value* target) {
  absl::flat_hash_set<const Operation*> seen;
  std::vector<const Value*> stack = {source};
  while (!stack.empty()) {
    const Value* v = stack.back();
    stack.pop_back();
    if (v == target) return true;
    for (const Operation* user : v->users()) {
      if (!seen.insert(user).second) continue;
      for (const Value* r : user->results()) stack.push_back(r);
    }
  }
  return false;
}

// The blocks ending at `ends`, each holding what its end's defining op reads back to
// `checkpoints` and the arguments.
RematBlocks BlocksEndingAt(const Function& function, std::vector<const Value*> ends,
                           const absl::flat_hash_set<const Value*>& checkpoints) {
  absl::flat_hash_map<const Operation*, int> position;
  int p = 0;
  for (const Operation* op : *function.body()) position[op] = p++;
  std::sort(ends.begin(), ends.end(), [&](const Value* a, const Value* b) {
    return position.at(a->defining_op()) < position.at(b->defining_op());
  });
  ends.erase(std::unique(ends.begin(), ends.end()), ends.end());

  RematBlocks result;
  for (const Value* end : ends) {
    std::vector<const Operation*> inside;
    absl::flat_hash_set<const Operation*> seen;
    std::vector<const Value*> stack(end->defining_op()->operands().begin(),
                                    end->defining_op()->operands().end());
    while (!stack.empty()) {
      const Value* v = stack.back();
      stack.pop_back();
      const Operation* def = v->defining_op();
      if (def == nullptr || checkpoints.contains(v) || !seen.insert(def).second) continue;
      inside.push_back(def);
      for (const Value* operand : def->operands()) stack.push_back(operand);
    }
    if (inside.empty()) continue;
    std::sort(inside.begin(), inside.end(), [&](const Operation* a, const Operation* b) {
      return position.at(a) < position.at(b);
    });
    const int block = static_cast<int>(result.blocks.size());
    for (const Operation* op : inside) result.owner.try_emplace(op, block);
    result.blocks.push_back(std::move(inside));
  }
  return result;
}

}  // namespace

RematBlocks FindResidualBlocks(const Function& function) {
  absl::flat_hash_set<const Value*> checkpoints;
  std::vector<const Value*> ends;
  for (const Operation* norm : *function.body()) {
    if (!IsNorm(*norm) || norm->num_operands() == 0 || norm->num_results() != 1) continue;
    const Value* x = norm->operand(0);
    if (x->is_literal()) continue;
    for (const Operation* add : x->users()) {
      if (!add->Is(OpKind::kAdd) || add->num_operands() != 2) continue;
      const Value* branch = add->operand(0) == x ? add->operand(1) : add->operand(0);
      if (branch == x || !Reaches(norm->result(0), branch)) continue;
      checkpoints.insert(x);
      checkpoints.insert(add->result(0));
      ends.push_back(add->result(0));
    }
  }
  return BlocksEndingAt(function, std::move(ends), checkpoints);
}

absl::StatusOr<RematBlocks> FindCheckpointBlocks(const Function& function,
                                                 const std::vector<std::string>& names) {
  absl::flat_hash_map<std::string, const Value*> by_name;
  const Block& body = *function.body();
  for (int i = 0; i < body.num_arguments(); ++i) {
    by_name[body.argument(i)->name()] = body.argument(i);
  }
  for (const Operation* op : body) {
    for (const Value* r : op->results()) {
      if (!r->name().empty()) by_name[r->name()] = r;
    }
  }
  absl::flat_hash_set<const Value*> checkpoints;
  std::vector<const Value*> ends;
  for (const std::string& name : names) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      return absl::NotFoundError(absl::StrFormat(
          "remat-at names %%%s, which @%s does not define", name, function.name()));
    }
    checkpoints.insert(it->second);
    if (it->second->defining_op() != nullptr) ends.push_back(it->second);
  }
  return BlocksEndingAt(function, std::move(ends), checkpoints);
}

}  // namespace commir
