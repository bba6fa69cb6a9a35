#include "sim/attention_positions.h"

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "commir/attention_op.h"
#include "sim/attention_time.h"

namespace commir::sim {
namespace {

const Operation* ParentOp(const Operation* op) {
  return op->parent_block() != nullptr ? op->parent_block()->parent_op() : nullptr;
}

// Whether `op` is `loop` or nested inside it.
bool Inside(const Operation* op, const Operation& loop) {
  for (; op != nullptr; op = ParentOp(op)) {
    if (op == &loop) return true;
  }
  return false;
}

// The function whose body holds `op` (null when detached).
const Function* FunctionOf(const Operation* op) {
  while (ParentOp(op) != nullptr) op = ParentOp(op);
  return op->parent_block() != nullptr ? op->parent_block()->parent_function() : nullptr;
}

class Variance {
 public:
  explicit Variance(const Operation& loop) : loop_(loop), function_(FunctionOf(&loop)) {}

  // Whether `value` may differ between iterations of the loop. Index values form a DAG
  // of index ops: each value is decided once (memoized), iteratively (no deep recursion).
  bool Varies(const Value* value) {
    std::vector<const Value*> stack = {value};
    while (!stack.empty()) {
      const Value* v = stack.back();
      if (known_.contains(v)) {
        stack.pop_back();
        continue;
      }
      if (v->is_literal()) {
        known_[v] = false;
        stack.pop_back();
        continue;
      }
      if (v->kind() == Value::Kind::kBlockArgument) {
        known_[v] = ArgumentVaries(*v);
        stack.pop_back();
        continue;
      }
      const Operation* def = v->defining_op();
      // Defined before the loop in its function: fixed while it runs. (A value of a called
      // function is computed at each call: its operands decide.)
      if (def == nullptr || (FunctionOf(def) == function_ && !Inside(def, loop_))) {
        known_[v] = def == nullptr;
        stack.pop_back();
        continue;
      }
      bool pending = false, varies = false;
      for (const Value* operand : def->operands()) {
        auto it = known_.find(operand);
        if (it == known_.end()) {
          stack.push_back(operand);
          pending = true;
        } else {
          varies = varies || it->second;
        }
      }
      if (pending) continue;
      known_[v] = varies;
      stack.pop_back();
    }
    return known_[value];
  }

 private:
  bool ArgumentVaries(const Value& argument) const {
    const Block* block = argument.owner_block();
    const Operation* owner = block != nullptr ? block->parent_op() : nullptr;
    if (owner == nullptr) return true;                 // a function's argument
    if (owner == &loop_) return true;                  // this loop's variable or carried value
    if (owner->Is(OpKind::kFor)) return argument.index() != 0;  // another loop's carried value
    return true;
  }

  const Operation& loop_;
  const Function* function_;
  absl::flat_hash_map<const Value*, bool> known_;
};

}  // namespace

bool AttentionPositionsVaryIn(const Operation& loop, const Module* module) {
  Variance variance(loop);
  absl::flat_hash_set<const Function*> visited;
  std::vector<const Block*> pending;
  for (int r = 0; r < loop.num_regions(); ++r) pending.push_back(loop.region(r));
  while (!pending.empty()) {
    const Block* block = pending.back();
    pending.pop_back();
    for (const Operation* op : *block) {
      if (AttentionTimeDependsOnPositions(*op)) {
        const int first = op->Is(OpKind::kAttention) ? AttentionOp::kQPos : AttentionGradOp::kQPos;
        for (int i = first; i < op->num_operands(); ++i) {
          if (variance.Varies(op->operand(i))) return true;
        }
      }
      for (int r = 0; r < op->num_regions(); ++r) pending.push_back(op->region(r));
      if (op->Is(OpKind::kCall) && module != nullptr) {
        const Attribute* callee_name = op->attrs().Find("callee");
        const Function* callee =
            callee_name != nullptr ? module->FindFunction(callee_name->string_value()) : nullptr;
        if (callee != nullptr && callee->body() != nullptr && visited.insert(callee).second) {
          pending.push_back(callee->body());
        }
      }
    }
  }
  return false;
}

}  // namespace commir::sim
