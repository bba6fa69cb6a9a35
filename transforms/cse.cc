#include "transforms/cse.h"

#include "transforms/option_schema.h"

#include <bit>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/hash/hash.h"

namespace commir {
namespace {

// ---- Equivalence ------------------------------------------------------------------

// Attribute equality that tells 0.0 from -0.0 (x / 0.0 and x / -0.0 differ) and lets a
// NaN equal the same NaN. It refines Attribute::operator==, so Attribute's hash still
// agrees with it.
bool SameAttribute(const Attribute& a, const Attribute& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Attribute::Kind::kFloat:
      return std::bit_cast<uint64_t>(a.float_value()) == std::bit_cast<uint64_t>(b.float_value());
    case Attribute::Kind::kList:
    case Attribute::Kind::kAxes: {
      if (a.list().size() != b.list().size()) return false;
      for (size_t i = 0; i < a.list().size(); ++i) {
        if (!SameAttribute(a.list()[i], b.list()[i])) return false;
      }
      return true;
    }
    default: return a == b;
  }
}

// Order-insensitive, like AttrDict::operator== (attribute order carries no meaning).
bool SameAttributes(const AttrDict& a, const AttrDict& b) {
  if (a.size() != b.size()) return false;
  for (const auto& [key, value] : a.entries()) {
    const Attribute* other = b.Find(key);
    if (other == nullptr || !SameAttribute(value, *other)) return false;
  }
  return true;
}

bool SameOperand(const Value* a, const Value* b) {
  if (a == b) return true;
  return a->is_literal() && b->is_literal() && a->type() == b->type() &&
         std::bit_cast<uint64_t>(a->literal_value()) == std::bit_cast<uint64_t>(b->literal_value());
}

size_t HashOperand(const Value* value) {
  if (!value->is_literal()) return absl::HashOf(value);
  return absl::HashOf(std::bit_cast<uint64_t>(value->literal_value()), value->type());
}

bool IsSwappable(const Operation* op) {
  return op->def().Has(kCommutative) && op->num_operands() == 2;
}

bool SameOperands(const Operation* a, const Operation* b) {
  absl::Span<Value* const> x = a->all_operands();
  absl::Span<Value* const> y = b->all_operands();
  if (x.size() != y.size() || a->num_operands() != b->num_operands()) return false;
  // The stream operand, if any, is last and never swaps.
  if (a->stream_operand() != nullptr || b->stream_operand() != nullptr) {
    if (a->stream_operand() == nullptr || b->stream_operand() == nullptr ||
        !SameOperand(a->stream_operand(), b->stream_operand())) {
      return false;
    }
  }
  bool in_order = true;
  for (int i = 0; in_order && i < a->num_operands(); ++i) {
    in_order = SameOperand(a->operand(i), b->operand(i));
  }
  if (in_order) return true;
  return IsSwappable(a) && SameOperand(a->operand(0), b->operand(1)) &&
         SameOperand(a->operand(1), b->operand(0));
}

bool Equivalent(const Operation* a, const Operation* b) {
  if (a == b) return true;
  if (a->kind() != b->kind() || a->num_results() != b->num_results()) return false;
  for (int i = 0; i < a->num_results(); ++i) {
    if (a->result(i)->type() != b->result(i)->type()) return false;
  }
  return SameOperands(a, b) && SameAttributes(a->attrs(), b->attrs());
}

size_t HashOp(const Operation* op) {
  size_t h = absl::HashOf(op->kind(), op->num_operands(), op->num_results());
  if (IsSwappable(op)) {
    // Symmetric in the two operands, so that swapped operands hash alike.
    size_t x = HashOperand(op->operand(0));
    size_t y = HashOperand(op->operand(1));
    h = absl::HashOf(h, x < y ? x : y, x < y ? y : x);
  } else {
    for (Value* operand : op->operands()) h = absl::HashOf(h, HashOperand(operand));
  }
  if (Value* stream = op->stream_operand()) h = absl::HashOf(h, HashOperand(stream));
  for (int i = 0; i < op->num_results(); ++i) h = absl::HashOf(h, op->result(i)->type());
  return absl::HashOf(h, op->attrs());
}

// A table entry: the op with its hash computed once.
struct Entry {
  Operation* op;
  size_t hash;
};
struct EntryHash {
  size_t operator()(const Entry& e) const { return e.hash; }
};
struct EntryEq {
  bool operator()(const Entry& a, const Entry& b) const { return Equivalent(a.op, b.op); }
};

// ---- The walk ---------------------------------------------------------------------

class CommonSubexpressionEliminator {
 public:
  int64_t Run(Function& function) {
    ProcessBlock(function.body());
    // In one batch: a merged op's entries sit anywhere in its operands' user lists (a
    // constant merged a thousand times has them interleaved with the survivors'), so
    // erasing ops one by one would search those lists once per op.
    Operation::EraseAll(duplicates_);
    return static_cast<int64_t>(duplicates_.size());
  }

 private:
  static bool Mergeable(const Operation* op) {
    return op->num_results() > 0 && op->num_regions() == 0 && !op->def().Has(kTerminator);
  }

  // Entries inserted while inside a block are removed when leaving it: values defined
  // there do not dominate anything after the block.
  void ProcessBlock(Block* block) {
    size_t mark = scope_log_.size();
    for (Operation* op : *block) {
      for (int r = 0; r < op->num_regions(); ++r) ProcessBlock(op->region(r));
      if (!Mergeable(op)) continue;
      Entry entry{op, HashOp(op)};
      auto [it, inserted] = table_.insert(entry);
      if (inserted) {
        scope_log_.push_back(entry);
        continue;
      }
      Operation* existing = it->op;
      for (int i = 0; i < op->num_results(); ++i) {
        op->result(i)->ReplaceAllUsesWith(existing->result(i));
      }
      duplicates_.push_back(op);
    }
    while (scope_log_.size() > mark) {
      table_.erase(scope_log_.back());
      scope_log_.pop_back();
    }
  }

  absl::flat_hash_set<Entry, EntryHash, EntryEq> table_;
  std::vector<Entry> scope_log_;
  // Merged ops, erased after the walk (their results are already unused).
  std::vector<Operation*> duplicates_;
};

}  // namespace

int64_t EliminateCommonSubexpressions(Function& function) {
  return CommonSubexpressionEliminator().Run(function);
}

int64_t EliminateCommonSubexpressions(Module& module) {
  int64_t erased = 0;
  for (Function* function : module.functions()) erased += EliminateCommonSubexpressions(*function);
  return erased;
}

const PassInfo& CsePass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<CsePass>(
      "cse",
      "Merge equivalent ops into an identical op that dominates them"));
  return *info;
}

absl::Status CsePass::Run(Module& module) {
  const int64_t merged = EliminateCommonSubexpressions(module);
  AddToStatistic("rewrites", "Ops merged into an equivalent op that dominates them", merged);
  return absl::OkStatus();
}

}  // namespace commir
