#include "transforms/canonicalize.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "transforms/constant_folding.h"

namespace commir {
namespace {

// Whether `value` is a constant (literal or `full`) equal to `target` in its type.
bool IsConstant(const Value* value, int64_t target) {
  std::optional<Scalar> c = ConstantOf(value);
  if (!c) return false;
  return IsIntegral(value->type()) ? c->i == target : c->f == static_cast<double>(target);
}

// The operand of `op` if it is a result of an op of `kind`, else null.
Operation* OperandDefinedBy(const Operation* op, int i, OpKind kind) {
  const Value* operand = op->operand(i);
  if (operand->kind() != Value::Kind::kResult || !operand->defining_op()->Is(kind)) return nullptr;
  return operand->defining_op();
}

class Canonicalizer {
 public:
  Canonicalizer(const CanonicalizeOptions& options, int64_t& budget)
      : options_(options), budget_(budget) {}

  int64_t Run(Function& function) {
    std::vector<Operation*> order;
    CollectOps(function.body(), order);
    // Popped from the back: program order first, so producers fold before users.
    for (auto it = order.rbegin(); it != order.rend(); ++it) Push(*it);
    int64_t rewrites = 0;
    while (!worklist_.empty() && budget_ != 0) {
      Operation* op = worklist_.back();
      worklist_.pop_back();
      if (!pending_.erase(op)) continue;  // pushed twice, or replaced meanwhile
      if (Visit(op)) {
        ++rewrites;
        if (budget_ > 0) --budget_;
      }
    }
    EraseReplacedAndDeadProducers();
    return rewrites;
  }

 private:
  static void CollectOps(Block* block, std::vector<Operation*>& out) {
    for (Operation* op : *block) {
      out.push_back(op);
      for (int r = 0; r < op->num_regions(); ++r) CollectOps(op->region(r), out);
    }
  }

  void Push(Operation* op) {
    if (replaced_set_.contains(op)) return;
    if (pending_.insert(op).second) worklist_.push_back(op);
  }

  bool Visit(Operation* op) {
    if (op->num_results() != 1 || op->num_regions() != 0) return false;
    if (op->result(0)->type().is_null()) return false;
    if (options_.fold_constants && Fold(op)) return true;
    return Simplify(op);
  }

  // ---- Constant folding -----------------------------------------------------------

  bool Fold(Operation* op) {
    if (!op->def().Has(kElementwise)) return false;
    Type result_type = op->result(0)->type();
    // A constant cannot be partial.
    if (result_type.is_tensor() && !result_type.partial().empty()) return false;
    std::vector<Scalar> values;
    for (Value* operand : op->operands()) {
      std::optional<Scalar> c = ConstantOf(operand);
      if (!c) return false;
      values.push_back(*c);
    }
    std::optional<Scalar> folded;
    if (op->Is(OpKind::kConvert)) {
      folded = FoldConvert(op->operand(0)->type(), result_type, values[0]);
    } else if (values.size() == 1) {
      folded = FoldUnary(*op, result_type, values[0]);
    } else if (values.size() == 2) {
      folded = FoldBinary(op->kind(), result_type, values[0], values[1]);
    }
    if (!folded) return false;
    std::optional<Attribute> value = ValueAttribute(*folded, result_type);
    if (!value) return false;
    AttrDict attrs;
    attrs.Set("value", *std::move(value));
    Type types[] = {result_type};
    Operation* full = op->parent_block()->InsertBefore(
        op, Operation::Create(GetOpDef(OpKind::kFull), {}, types, std::move(attrs), 0, op->loc()));
    // The constant takes over the name, so the output reads like the input.
    full->result(0)->set_name(op->result(0)->name());
    full->result(0)->set_loc(op->result(0)->loc());
    ReplaceOp(op, full->result(0));
    return true;
  }

  // ---- Identities and compositions ------------------------------------------------

  bool Simplify(Operation* op) {
    Type result_type = op->result(0)->type();
    // Replaces `op` by `x` when that keeps the type exactly.
    auto replace_with = [&](Value* x) {
      if (x == nullptr || x->is_literal() || x->type() != result_type) return false;
      ReplaceOp(op, x);
      return true;
    };
    switch (op->kind()) {
      case OpKind::kAdd:
        return (IsConstant(op->operand(1), 0) && replace_with(op->operand(0))) ||
               (IsConstant(op->operand(0), 0) && replace_with(op->operand(1)));
      case OpKind::kMul:
        return (IsConstant(op->operand(1), 1) && replace_with(op->operand(0))) ||
               (IsConstant(op->operand(0), 1) && replace_with(op->operand(1)));
      case OpKind::kSub:
        return IsConstant(op->operand(1), 0) && replace_with(op->operand(0));
      case OpKind::kDiv:
        return IsConstant(op->operand(1), 1) && replace_with(op->operand(0));
      case OpKind::kNeg: {
        Operation* inner = OperandDefinedBy(op, 0, OpKind::kNeg);
        return inner != nullptr && replace_with(inner->operand(0));
      }
      case OpKind::kTranspose: return SimplifyTranspose(op, replace_with);
      case OpKind::kReshape: {
        if (replace_with(op->operand(0))) return true;
        Operation* inner = OperandDefinedBy(op, 0, OpKind::kReshape);
        if (inner == nullptr) return false;
        RebuildWithOperand(op, inner->operand(0), op->attrs());  // row-major reshapes compose
        return true;
      }
      case OpKind::kConvert:
      case OpKind::kBroadcast:
      case OpKind::kReshard: return replace_with(op->operand(0));
      default: return false;
    }
  }

  template <typename ReplaceWith>
  bool SimplifyTranspose(Operation* op, ReplaceWith& replace_with) {
    const Attribute* perm_attr = op->attrs().Find("perm");
    std::optional<std::vector<int64_t>> perm;
    if (perm_attr != nullptr) perm = perm_attr->int_list();
    if (!perm) return false;
    bool identity = true;
    for (size_t i = 0; i < perm->size(); ++i) identity &= (*perm)[i] == static_cast<int64_t>(i);
    if (identity && replace_with(op->operand(0))) return true;
    Operation* inner = OperandDefinedBy(op, 0, OpKind::kTranspose);
    if (inner == nullptr) return false;
    const Attribute* inner_attr = inner->attrs().Find("perm");
    std::optional<std::vector<int64_t>> inner_perm;
    if (inner_attr != nullptr) inner_perm = inner_attr->int_list();
    if (!inner_perm || inner_perm->size() != perm->size()) return false;
    // Result dim i is the inner result's dim perm[i], which is x's dim inner[perm[i]].
    std::vector<int64_t> composed;
    for (int64_t p : *perm) {
      if (p < 0 || p >= static_cast<int64_t>(inner_perm->size())) return false;
      composed.push_back((*inner_perm)[p]);
    }
    AttrDict attrs = op->attrs();
    attrs.Set("perm", Attribute::IntList(composed));
    RebuildWithOperand(op, inner->operand(0), std::move(attrs));
    return true;
  }

  // ---- Mutation helpers -----------------------------------------------------------
  //
  // Replaced ops are only unlinked from their users here and erased in one batch at the
  // end (EraseReplacedAndDeadProducers): erasing one op searches its operands' user
  // lists, which is quadratic when a million rewritten ops share an operand (x * %one).

  // Replaces the single-operand `op` by a copy reading `operand`, with `attrs`.
  void RebuildWithOperand(Operation* op, Value* operand, AttrDict attrs) {
    Value* operands[] = {operand};
    Type types[] = {op->result(0)->type()};
    Operation* copy = op->parent_block()->InsertBefore(
        op, Operation::Create(op->def(), operands, types, std::move(attrs), 0, op->loc()));
    copy->set_type_loc(op->type_loc());
    if (Value* stream = op->stream_operand()) copy->SetStreamOperand(stream);
    copy->result(0)->set_name(op->result(0)->name());
    copy->result(0)->set_loc(op->result(0)->loc());
    ReplaceOp(op, copy->result(0));
    Push(copy);
  }

  void ReplaceOp(Operation* op, Value* replacement) {
    Value* result = op->result(0);
    for (Operation* user : result->users()) Push(user);
    result->ReplaceAllUsesWith(replacement);
    pending_.erase(op);
    replaced_.push_back(op);
    replaced_set_.insert(op);
  }

  // Erases the replaced ops and the producers left without other users (transitively),
  // in one batch. Loops are left to dce, and so are ops that nothing used in the input.
  //
  // Each op to erase is processed once. A producer's count of remaining users is taken
  // when one of its users is first processed (not counting processed ones), then
  // decreases as its other users are processed; at zero the producer goes too.
  void EraseReplacedAndDeadProducers() {
    std::vector<Operation*> to_erase = replaced_;
    absl::flat_hash_set<const Operation*> queued(to_erase.begin(), to_erase.end());
    absl::flat_hash_set<const Operation*> processed;
    absl::flat_hash_map<const Operation*, int64_t> remaining;
    for (size_t next = 0; next < to_erase.size(); ++next) {
      Operation* op = to_erase[next];
      processed.insert(op);
      // Each producer with the number of uses `op` makes of it.
      std::vector<std::pair<Operation*, int64_t>> producers;
      for (Value* operand : op->all_operands()) {
        if (operand->kind() != Value::Kind::kResult) continue;
        Operation* producer = operand->defining_op();
        auto same = [&](const auto& entry) { return entry.first == producer; };
        auto found = std::find_if(producers.begin(), producers.end(), same);
        if (found != producers.end()) {
          ++found->second;
        } else {
          producers.emplace_back(producer, 1);
        }
      }
      for (const auto& [producer, uses] : producers) {
        if (queued.contains(producer) || producer->def().Has(kTerminator) ||
            producer->num_regions() > 0) {
          continue;
        }
        auto [it, first] = remaining.try_emplace(producer, 0);
        if (first) {
          // Counted now, so `op` (processed) is already left out.
          for (int i = 0; i < producer->num_results(); ++i) {
            for (const Operation* user : producer->result(i)->users()) {
              it->second += processed.contains(user) ? 0 : 1;
            }
          }
        } else {
          it->second -= uses;
        }
        if (it->second == 0) {
          queued.insert(producer);
          to_erase.push_back(producer);
        }
      }
    }
    Operation::EraseAll(to_erase);
    replaced_.clear();
    replaced_set_.clear();
  }

  const CanonicalizeOptions& options_;
  int64_t& budget_;  // rewrites left; negative: unlimited
  std::vector<Operation*> worklist_;
  absl::flat_hash_set<Operation*> pending_;
  // Replaced ops, still linked into their blocks until the batch erase.
  std::vector<Operation*> replaced_;
  absl::flat_hash_set<const Operation*> replaced_set_;
};

}  // namespace

int64_t Canonicalize(Function& function, const CanonicalizeOptions& options) {
  int64_t budget = options.max_rewrites;
  return Canonicalizer(options, budget).Run(function);
}

int64_t Canonicalize(Module& module, const CanonicalizeOptions& options) {
  int64_t budget = options.max_rewrites;
  int64_t rewrites = 0;
  for (Function* function : module.functions()) {
    rewrites += Canonicalizer(options, budget).Run(*function);
  }
  return rewrites;
}

const OptionSchema<CanonicalizeOptions>& CanonicalizeOptions::Schema() {
  static const auto* schema =
      &(*new OptionSchema<CanonicalizeOptions>())
           .Bool("fold-constants", &CanonicalizeOptions::fold_constants,
                 "Fold elementwise and index ops whose operands are all constants into 'full'")
           .Int("max-rewrites", &CanonicalizeOptions::max_rewrites,
                "Stop after this many rewrites (-1: no limit); bisects a bad rewrite", -1);
  return *schema;
}

const PassInfo& CanonicalizePass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<CanonicalizePass>(
      "canonicalize", "Fold constants and simplify algebraic identities, to a fixed point"));
  return *info;
}

absl::Status CanonicalizePass::Run(Module& module) {
  const int64_t rewrites = Canonicalize(module, options());
  AddToStatistic("rewrites", "Constants folded and identities simplified", rewrites);
  return absl::OkStatus();
}

}  // namespace commir
