#include "transforms/sharding/lower.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "commir/status_macros.h"
#include "transforms/sharding/decompositions.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/op_rules.h"
#include "transforms/sharding/op_sharding.h"

namespace commir::sharding {
namespace {

using Operand = OpBuilder::Operand;

class Lowering {
 public:
  Lowering(Function& function, DiagnosticEngine* diagnostics)
      : function_(function), mesh_(*function.mesh()), diagnostics_(diagnostics) {}

  absl::Status Run() {
    Block* body = function_.body();
    std::vector<Operation*> old_ops;
    Operation* old_return = nullptr;
    for (Operation* op : *body) {
      if (op->def().Has(kTerminator)) {
        old_return = op;
      } else {
        old_ops.push_back(op);
      }
    }
    if (old_return == nullptr || old_return->next() != nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("@", function_.name(), " does not end with 'return'"));
    }
    // Precompute every rule while the global types are intact.
    std::vector<OpRule> rules;
    for (Operation* op : old_ops) {
      absl::StatusOr<OpRule> rule = RuleFor(*op);
      if (!rule.ok()) return Error(op, rule.status());
      rules.push_back(*std::move(rule));
    }
    // From here on the arguments carry their per-device types; Global() still knows the
    // global ones.
    for (int i = 0; i < body->num_arguments(); ++i) {
      global_args_[body->argument(i)] = function_.arg_types()[i];
    }
    function_.set_spmd(true);
    function_.RefreshArgumentTypes();
    OpBuilder emitter(&function_, body, old_return);
    for (int i = 0; i < body->num_arguments(); ++i) {
      map_[body->argument(i)] = {body->argument(i), Layout::Of(function_.arg_types()[i], mesh_)};
    }
    sharing_ = SharingUsers(old_ops);
    absl::Status status = LowerBody(emitter, old_ops, rules, old_return);
    // On success the global ops go, on failure the spmd ops emitted so far (the function
    // is then left as it was). EraseAll drops the uses among them in any order.
    std::vector<Operation*> doomed;
    if (status.ok()) {
      doomed = old_ops;
      doomed.push_back(old_return);
    } else {
      for (Operation* op = old_return->prev(); op != nullptr && !IsOld(op, old_ops);
           op = op->prev()) {
        doomed.push_back(op);
      }
      function_.set_spmd(false);
      function_.RefreshArgumentTypes();
    }
    // One batch: erasing the ops one by one would search %arg's user list once per
    // use, quadratic when thousands of ops read one argument.
    Operation::EraseAll(doomed);
    return status;
  }

 private:
  static bool IsOld(const Operation* op, const std::vector<Operation*>& old_ops) {
    return !old_ops.empty() && op == old_ops.back();
  }

  absl::Status LowerBody(OpBuilder& emitter, const std::vector<Operation*>& old_ops,
                         const std::vector<OpRule>& rules, Operation* old_return) {
    for (size_t k = 0; k < old_ops.size(); ++k) {
      if (absl::Status s = LowerOp(emitter, *old_ops[k], rules[k], sharing_[k]); !s.ok()) {
        return Error(old_ops[k], s);
      }
    }
    emitter.set_loc(old_return->loc());
    std::vector<Operand> returned;
    for (int i = 0; i < old_return->num_operands(); ++i) {
      Value* v = old_return->operand(i);
      const Mapped& m = map_.at(v);
      absl::StatusOr<Value*> local = EmitReshard(emitter, m.value, Global(v), m.layout,
                                                 Layout::Of(function_.result_types()[i], mesh_));
      if (!local.ok()) return Error(old_return, local.status());
      returned.push_back(*local);
    }
    absl::StatusOr<Operation*> ret = emitter.Create(OpKind::kReturn, returned, {}, {}, 0);
    if (!ret.ok()) return Error(old_return, ret.status());
    return absl::OkStatus();
  }

  struct Mapped {
    Value* value = nullptr;
    Layout layout;
  };

  // The global type of a value of the global function.
  Type Global(const Value* v) const {
    auto it = global_args_.find(v);
    return it == global_args_.end() ? v->type() : it->second;
  }

  absl::Status Error(const Operation* op, const absl::Status& status) {
    std::string message = absl::StrCat("lower-to-spmd: '", op->name(), "': ", status.message());
    if (diagnostics_ != nullptr) diagnostics_->Error(op->loc(), message);
    return absl::FailedPreconditionError(message);
  }

  absl::Status LowerOp(OpBuilder& e, const Operation& op, const OpRule& rule,
                       const std::vector<int>& sharing) {
    e.set_loc(op.loc());
    StrategyQuery query;
    query.op = &op;
    query.rule = &rule;
    query.mesh = &mesh_;
    query.sharing = sharing;
    for (int i = 0; i < op.num_operands(); ++i) {
      Value* v = op.operand(i);
      query.operand_types.push_back(Global(v));
      std::vector<Layout> available;
      if (rule.operands[i].is_tensor) {
        query.operands.push_back(map_.at(v).layout);
        for (const Mapped& copy : CopiesOf(v)) available.push_back(copy.layout);
      } else {
        query.operands.push_back(std::nullopt);
      }
      query.available.push_back(std::move(available));
    }
    for (int r = 0; r < op.num_results(); ++r) {
      Type t = op.result(r)->type();
      query.targets.push_back(t.is_tensor() ? std::optional<Layout>(Layout::Of(t, mesh_)) : std::nullopt);
    }
    Choice choice = ChooseStrategy(query);

    std::vector<Operand> operands;
    for (int i = 0; i < op.num_operands(); ++i) {
      Value* v = op.operand(i);
      if (v->is_literal()) {
        operands.push_back(Operand::Literal(v->literal_value(), v->type()));
        continue;
      }
      const Mapped& m = map_.at(v);
      if (!rule.operands[i].is_tensor) {
        operands.push_back(m.value);
        continue;
      }
      int source = choice.sources[i];
      const Mapped from = source < 0 ? m : CopiesOf(v)[source];
      COMMIR_ASSIGN_OR_RETURN(Value* local,
                              EmitReshard(e, from.value, Global(v), from.layout, choice.operands[i]));
      if (local != m.value && local != from.value) copies_[v].push_back({local, choice.operands[i]});
      operands.push_back(local);
    }

    COMMIR_ASSIGN_OR_RETURN(std::vector<Value*> natural,
                            EmitLocal(e, op, rule, choice, operands, query.operand_types));
    for (int r = 0; r < op.num_results(); ++r) {
      Value* result = op.result(r);
      Value* local = natural[r];
      if (!result->type().is_tensor()) {
        local->set_name(result->name());
        map_[result] = {local, Layout()};
        continue;
      }
      Type expected = LocalTypeOf(result->type(), choice.results[r], mesh_);
      if (local->type() != expected) {
        return absl::InternalError(absl::StrCat("the per-device result is ", local->type().ToString(),
                                                " but its layout ", choice.results[r].ToString(),
                                                " needs ", expected.ToString()));
      }
      Layout target = *query.targets[r];
      // A value that existed before this op (a `reshard` may return its operand as is)
      // keeps its name.
      bool existed = false;
      for (Value* v : op.operands()) {
        auto it = map_.find(v);
        existed |= it != map_.end() && it->second.value == local;
      }
      COMMIR_ASSIGN_OR_RETURN(
          Value* final_value,
          EmitReshard(e, local, result->type(), choice.results[r], target, result->name()));
      if (final_value == local && !existed) local->set_name(result->name());
      map_[result] = {final_value, target};
    }
    return absl::OkStatus();
  }

  // The per-device op(s) for `op` on operands already laid out as `choice` needs; returns
  // its results laid out as choice.results. What differs from the op itself is the op's
  // decomposition in the sharding table.
  absl::StatusOr<std::vector<Value*>> EmitLocal(OpBuilder& e, const Operation& op, const OpRule& rule,
                                                const Choice& choice,
                                                const std::vector<Operand>& operands,
                                                const std::vector<Type>& global_operand_types) {
    DecompositionInput input{e, op, rule, choice, operands, global_operand_types};
    const OpSharding* sharding = ShardingOf(op.kind());
    if (sharding != nullptr && sharding->decompose != nullptr) {
      COMMIR_ASSIGN_OR_RETURN(std::optional<std::vector<Value*>> decomposed,
                              sharding->decompose(input));
      if (decomposed.has_value()) return *std::move(decomposed);
    }
    return EmitPerDeviceOp(input, op.attrs());
  }

  // The reshards of `v` made so far for its users (each layout once).
  const std::vector<Mapped>& CopiesOf(const Value* v) const {
    static const std::vector<Mapped>* const kNone = new std::vector<Mapped>();
    auto it = copies_.find(v);
    return it == copies_.end() ? *kNone : it->second;
  }

  Function& function_;
  const Mesh& mesh_;
  DiagnosticEngine* diagnostics_;
  absl::flat_hash_map<const Value*, Mapped> map_;
  // Per global value: the per-device values it was resharded to for earlier users, so
  // that a later user needing the same layout reuses them (one all_gather of a normed
  // activation feeds the q, k and v matmuls) and ChooseStrategy costs them as free.
  absl::flat_hash_map<const Value*, std::vector<Mapped>> copies_;
  // SharingUsers of the global ops, so that the strategies are those propagation chose.
  std::vector<std::vector<int>> sharing_;
  absl::flat_hash_map<const Value*, Type> global_args_;
};

}  // namespace

absl::Status LowerToSpmd(Function& function, DiagnosticEngine* diagnostics) {
  if (function.is_spmd() || function.mesh() == nullptr) return absl::OkStatus();
  if (!function.mesh()->IsWellFormed()) {
    return absl::FailedPreconditionError(absl::StrCat("@", function.name(), ": invalid mesh"));
  }
  return Lowering(function, diagnostics).Run();
}

absl::Status LowerToSpmd(Module& module, DiagnosticEngine* diagnostics) {
  for (Function* function : module.functions()) {
    if (absl::Status s = LowerToSpmd(*function, diagnostics); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status LowerToSpmdPass::Run(Module& module) {
  int64_t global = 0;
  for (const Function* function : module.functions()) {
    global += !function->is_spmd() && function->mesh() != nullptr ? 1 : 0;
  }
  if (absl::Status s = LowerToSpmd(module, &diagnostics()); !s.ok()) return s;
  ReportRewrites(global, "Global functions partitioned into spmd functions",
                 "no global function with a mesh (spmd functions are lowered already)");
  return absl::OkStatus();
}

}  // namespace commir::sharding
