#include "commir/liveness.h"

namespace commir {
namespace {

// The block a value belongs to: its defining op's block, or the block it is an
// argument of.
const Block* DefiningBlock(const Value& value) {
  if (value.kind() == Value::Kind::kBlockArgument) return value.owner_block();
  return value.defining_op() == nullptr ? nullptr : value.defining_op()->parent_block();
}

// The op of `block` that contains `user` (itself, or the ancestor whose region holds
// it); null if `user` is not inside `block`.
const Operation* AncestorIn(const Block* block, const Operation* user) {
  while (user != nullptr && user->parent_block() != block) {
    const Block* parent = user->parent_block();
    user = parent == nullptr ? nullptr : parent->parent_op();
  }
  return user;
}

}  // namespace

Liveness::Liveness(const Function& function) {
  // Position of every op in its block, and every value to place.
  absl::flat_hash_map<const Operation*, int64_t> position;
  std::vector<const Value*> values;
  std::vector<const Block*> blocks{function.body()};
  while (!blocks.empty()) {
    const Block* block = blocks.back();
    blocks.pop_back();
    for (const Value* arg : block->arguments()) values.push_back(arg);
    int64_t index = 0;
    for (const Operation* op : *block) {
      position[op] = index++;
      for (const Value* result : op->results()) values.push_back(result);
      for (int r = 0; r < op->num_regions(); ++r) blocks.push_back(op->region(r));
    }
  }
  for (const Value* value : values) {
    const Block* block = DefiningBlock(*value);
    if (block == nullptr) continue;
    const Operation* last = nullptr;
    for (const Operation* user : value->users()) {
      const Operation* use = AncestorIn(block, user);
      if (use != nullptr && (last == nullptr || position[use] > position[last])) last = use;
    }
    const bool is_argument = value->kind() == Value::Kind::kBlockArgument;
    if ((last == nullptr && is_argument) || (last != nullptr && last->def().Has(kTerminator))) {
      released_by_owner_[block].push_back(value);
    } else {
      // A result nothing uses dies with the op that made it.
      dead_after_[last != nullptr ? last : value->defining_op()].push_back(value);
    }
  }
}

absl::Span<const Value* const> Liveness::DeadAfter(const Operation& op) const {
  auto it = dead_after_.find(&op);
  if (it == dead_after_.end()) return {};
  return it->second;
}

absl::Span<const Value* const> Liveness::ReleasedByOwner(const Block& block) const {
  auto it = released_by_owner_.find(&block);
  if (it == released_by_owner_.end()) return {};
  return it->second;
}

}  // namespace commir
