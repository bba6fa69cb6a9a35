#include "transforms/dce.h"

#include "transforms/option_schema.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace commir {
namespace {

// Whether `loop` has the shape the verifier demands (one body whose arguments are the
// induction variable and one per carried value, ending in a yield of each carried value).
// Liveness reasons per carried value only about such loops.
bool WellFormedLoop(const Operation* loop) {
  if (loop->num_regions() != 1) return false;
  const Block* body = loop->region(0);
  const Operation* yield = body->terminator();
  int n = loop->num_results();
  return loop->num_operands() == n && body->num_arguments() == n + 1 && yield != nullptr &&
         yield->Is(OpKind::kYield) && yield->num_operands() == n;
}

class DeadCodeEliminator {
 public:
  DceStats Run(Function& function) {
    // Without its return (invalid IR, which the verifier reports) nothing is known to
    // be live, and erasing everything would only hide the problem.
    Operation* ret = function.body()->terminator();
    if (ret == nullptr) return stats_;
    MarkOp(ret);
    while (!worklist_.empty()) {
      Value* value = worklist_.back();
      worklist_.pop_back();
      Propagate(value);
    }
    SweepBlock(function.body());
    stats_.ops_erased = static_cast<int64_t>(dead_.size());
    // Replaced loops join the dead ops (dead ops may still read their dropped values).
    for (const auto& [loop, kept] : rebuilds_) RebuildLoop(loop, kept);
    // In one batch: dead ops' entries sit anywhere in their operands' user lists, so
    // erasing them one by one would search those lists once per op.
    Operation::EraseAll(dead_);
    return stats_;
  }

 private:
  void MarkValue(Value* value) {
    if (value->is_literal()) return;
    if (live_values_.insert(value).second) worklist_.push_back(value);
  }

  // A live op needs all its operands, except a loop: it needs only its stream operand
  // here, and each carried init value once that carried value is known to be live.
  void MarkOp(Operation* op) {
    if (!live_ops_.insert(op).second) return;
    if (op->Is(OpKind::kFor) && WellFormedLoop(op)) {
      if (Value* stream = op->stream_operand()) MarkValue(stream);
      return;
    }
    for (Value* operand : op->all_operands()) MarkValue(operand);
    // A malformed loop (the verifier reports it) is kept whole.
    for (int r = 0; r < op->num_regions(); ++r) {
      if (Operation* terminator = op->region(r)->terminator()) MarkOp(terminator);
    }
  }

  // Carried value `i` of `loop` is live: its initial value and the value the body
  // yields for the next iteration are needed.
  void MarkCarried(Operation* loop, int i) {
    MarkOp(loop);
    if (!WellFormedLoop(loop)) return;
    MarkValue(loop->operand(i));
    MarkValue(loop->region(0)->terminator()->operand(i));
  }

  void Propagate(Value* value) {
    if (value->kind() == Value::Kind::kResult) {
      Operation* op = value->defining_op();
      if (op->Is(OpKind::kFor)) {
        MarkCarried(op, value->index());
      } else {
        MarkOp(op);
      }
      return;
    }
    Operation* loop = value->owner_block()->parent_op();
    if (loop == nullptr) return;  // a function argument
    if (value->index() == 0) {
      MarkOp(loop);  // the induction variable
    } else {
      MarkCarried(loop, value->index() - 1);
    }
  }

  bool IsLive(const Value* value) const { return live_values_.contains(value); }

  // Collects the dead ops of `block` (a dead loop whole) and the live loops whose
  // carried values shrink.
  void SweepBlock(Block* block) {
    for (Operation* op : *block) {
      if (op->def().Has(kTerminator)) {
        // Kept: return is the root, and a loop's yield lives as long as its loop.
      } else if (!live_ops_.contains(op)) {
        dead_.push_back(op);
      } else if (op->Is(OpKind::kFor)) {
        SweepLoop(op);
      }
    }
  }

  void SweepLoop(Operation* loop) {
    Block* body = loop->region(0);
    Operation* yield = body->terminator();
    int n = loop->num_results();
    bool well_formed = WellFormedLoop(loop);
    std::vector<int> kept;
    for (int i = 0; i < n; ++i) {
      if (!well_formed || IsLive(loop->result(i)) || IsLive(body->argument(i + 1))) {
        kept.push_back(i);
      }
    }
    if (static_cast<int>(kept.size()) < n) {
      // Stop yielding the dropped values, so that the ops computing them are unused
      // once the dead ops are gone.
      std::vector<Value*> yielded;
      for (int i : kept) yielded.push_back(yield->operand(i));
      yield->SetOperands(yielded);
      rebuilds_.emplace_back(loop, std::move(kept));
    }
    SweepBlock(body);
  }

  // Builds a loop that carries only the values `kept`, moves the body's ops into it and
  // queues `loop` (now with an empty body) for erasure.
  void RebuildLoop(Operation* loop, const std::vector<int>& kept) {
    std::vector<Value*> inits;
    std::vector<Type> types;
    for (int i : kept) {
      inits.push_back(loop->operand(i));
      types.push_back(loop->result(i)->type());
    }
    std::unique_ptr<Operation> owned =
        Operation::Create(loop->def(), inits, types, loop->attrs(), 1, loop->loc());
    owned->set_type_loc(loop->type_loc());
    Operation* rebuilt = loop->parent_block()->InsertBefore(loop, std::move(owned));
    if (Value* stream = loop->stream_operand()) rebuilt->SetStreamOperand(stream);

    Block* old_body = loop->region(0);
    Block* new_body = rebuilt->region(0);
    std::vector<Value*> old_args = {old_body->argument(0)};
    for (int i : kept) old_args.push_back(old_body->argument(i + 1));
    for (Value* old_arg : old_args) {
      Value* new_arg = new_body->AddArgument(old_arg->type(), old_arg->name(), old_arg->loc());
      old_arg->ReplaceAllUsesWith(new_arg);
    }
    while (!old_body->empty()) new_body->Append(old_body->Remove(old_body->front()));

    for (size_t k = 0; k < kept.size(); ++k) {
      Value* old_result = loop->result(kept[k]);
      Value* new_result = rebuilt->result(static_cast<int>(k));
      new_result->set_name(old_result->name());
      new_result->set_loc(old_result->loc());
      old_result->ReplaceAllUsesWith(new_result);
    }
    stats_.carried_values_dropped += loop->num_results() - static_cast<int64_t>(kept.size());
    dead_.push_back(loop);
  }

  absl::flat_hash_set<const Value*> live_values_;
  absl::flat_hash_set<const Operation*> live_ops_;
  std::vector<Value*> worklist_;
  std::vector<Operation*> dead_;
  std::vector<std::pair<Operation*, std::vector<int>>> rebuilds_;
  DceStats stats_;
};

}  // namespace

DceStats EliminateDeadCode(Function& function) { return DeadCodeEliminator().Run(function); }

DceStats EliminateDeadCode(Module& module) {
  DceStats total;
  for (Function* function : module.functions()) {
    DceStats stats = EliminateDeadCode(*function);
    total.ops_erased += stats.ops_erased;
    total.carried_values_dropped += stats.carried_values_dropped;
  }
  return total;
}

const PassInfo& DcePass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<DcePass>(
      "dce",
      "Erase unused ops, dead loops and loop-carried values nothing reads"));
  return *info;
}

absl::Status DcePass::Run(Module& module) {
  const DceStats stats = EliminateDeadCode(module);
  AddToStatistic("ops-erased", "Dead ops erased (a dead loop counts once)", stats.ops_erased);
  AddToStatistic("carried-values-dropped", "Loop-carried values nothing live reads, dropped",
                 stats.carried_values_dropped);
  return absl::OkStatus();
}

}  // namespace commir
