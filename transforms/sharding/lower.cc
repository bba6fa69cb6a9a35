#include "transforms/sharding/lower.h"

#include "transforms/option_schema.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "commir/status_macros.h"
#include "transforms/inline.h"
#include "transforms/sharding/decompositions.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/op_rules.h"
#include "transforms/sharding/op_sharding.h"
#include "transforms/sharding/sum_scatter.h"
#include "transforms/sharding/zigzag.h"

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
      Type type = function_.arg_types()[i];
      map_[body->argument(i)] = {body->argument(i), Layout::Of(type, mesh_),
                                 type.is_tensor() ? type.zigzag_dim() : -1};
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

  // Every per-device op emitted for a recomputed op (its decomposition, the reshards of
  // its operands) is a recomputed op too: without the mark, CSE would merge such an op
  // with its forward twin and undo autodiff{remat=...}.
  static void StampRemat(const Operation& op, Operation* before, Operation* old_return) {
    const Attribute* remat = op.attrs().Find(kRematAttr);
    if (remat == nullptr) return;
    for (Operation* e = before->next(); e != old_return; e = e->next()) {
      e->mutable_attrs().Set(kRematAttr, *remat);
    }
  }

  absl::Status LowerBody(OpBuilder& emitter, const std::vector<Operation*>& old_ops,
                         const std::vector<OpRule>& rules, Operation* old_return) {
    for (size_t k = 0; k < old_ops.size(); ++k) {
      Operation* before = old_return->prev();
      if (absl::Status s = LowerOp(emitter, *old_ops[k], rules[k], sharing_[k]); !s.ok()) {
        return Error(old_ops[k], s);
      }
      StampRemat(*old_ops[k], before, old_return);
    }
    emitter.set_loc(old_return->loc());
    std::vector<Operand> returned;
    for (int i = 0; i < old_return->num_operands(); ++i) {
      Value* v = old_return->operand(i);
      Type declared = function_.result_types()[i];
      Layout wanted = Layout::Of(declared, mesh_);
      int64_t zigzag = declared.is_tensor() ? declared.zigzag_dim() : -1;
      const Mapped& m = map_.at(v);
      // A value already in the declared zigzag layout is returned as it is.
      if (zigzag >= 0 && m.zigzag_dim == zigzag && m.layout == wanted) {
        returned.push_back(m.value);
        continue;
      }
      absl::StatusOr<Value*> local = Contiguous(emitter, v);
      if (local.ok()) local = EmitReshard(emitter, *local, Global(v), map_.at(v).layout, wanted);
      if (local.ok() && zigzag >= 0) {
        local = EmitZigzagExchange(emitter, *local, zigzag, wanted.dims[zigzag],
                                   mesh_.GroupSize(wanted.dims[zigzag]), ZigzagDirection::kToZigzag);
      }
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
    // The dimension whose split is zigzag (device r holds chunks r and 2n-1-r), or -1:
    // layout.dims[zigzag_dim] are its axes.
    int64_t zigzag_dim = -1;
    // The same value in the contiguous layout, once an op needed it (see Contiguous).
    Value* contiguous = nullptr;
  };

  // `v`'s per-device value in the contiguous layout (same Layout): a zigzag value is
  // exchanged (one all_to_all) once, and its other users that need it contiguous reuse
  // the exchange while those that keep the zigzag layout keep the value itself.
  absl::StatusOr<Value*> Contiguous(OpBuilder& e, const Value* v) {
    Mapped& m = map_.at(v);
    if (m.zigzag_dim < 0) return m.value;
    if (m.contiguous == nullptr) {
      const AxisList& axes = m.layout.dims[m.zigzag_dim];
      COMMIR_ASSIGN_OR_RETURN(m.contiguous, EmitZigzagExchange(e, m.value, m.zigzag_dim, axes,
                                                               mesh_.GroupSize(axes),
                                                               ZigzagDirection::kToContiguous));
    }
    return m.contiguous;
  }

  // The zigzag dimension `op`'s results keep when lowered as `choice`, or -1 when its
  // zigzag operands must be made contiguous first. The rule (docs/format-decisions.md):
  // an op keeps the layout when it treats every position of the zigzag dimension alike
  // and alone (elementwise ops whose split operands along it are all zigzag over the
  // same axes, rows of a matmul, norms and softmax over another dimension, attention
  // with q, k and v all zigzag along the sequence), and no operand needs a reshard.
  int64_t KeptZigzag(const Operation& op, const OpRule& rule, const Choice& choice) const {
    int64_t zigzag = -1;
    const AxisList* axes = nullptr;
    int64_t rank = op.num_results() > 0 && op.result(0)->type().is_tensor()
                       ? op.result(0)->type().rank() : -1;
    if (rank < 0) return -1;
    for (int i = 0; i < op.num_operands(); ++i) {
      if (!rule.operands[i].is_tensor || op.operand(i)->is_literal()) continue;
      const Mapped& m = map_.at(op.operand(i));
      if (m.zigzag_dim < 0) continue;
      // Zigzag operands line up with the results dimension for dimension and need no
      // reshard (attention's are made contiguous and resharded anyway, see LowerOp).
      if (op.operand(i)->type().rank() != rank) return -1;
      if (!op.Is(OpKind::kAttention) && choice.operands[i] != m.layout) return -1;
      if (axes == nullptr) {
        zigzag = m.zigzag_dim;
        axes = &m.layout.dims[zigzag];
      } else if (m.zigzag_dim != zigzag || m.layout.dims[zigzag] != *axes) {
        return -1;
      }
    }
    if (zigzag < 0 || rank < 0) return -1;
    // Operand i's dimension aligned with the result's dimension `zigzag` (NumPy
    // broadcasting aligns from the right): whether it is zigzag there or of size 1.
    auto aligned_ok = [&](int i) {
      const Value* x = op.operand(i);
      if (x->is_literal() || !x->type().is_tensor()) return true;
      int64_t d = zigzag - (rank - x->type().rank());
      if (d < 0) return true;
      const Mapped& m = map_.at(x);
      return x->type().dims()[d] == 1 ||
             (m.zigzag_dim == d && m.layout.dims[d] == *axes && d == zigzag);
    };
    switch (op.kind()) {
      case OpKind::kNeg: case OpKind::kAbs: case OpKind::kExp: case OpKind::kLog:
      case OpKind::kSqrt: case OpKind::kRsqrt: case OpKind::kTanh: case OpKind::kSigmoid:
      case OpKind::kRelu: case OpKind::kSilu: case OpKind::kGelu: case OpKind::kConvert:
      case OpKind::kAdd: case OpKind::kSub: case OpKind::kMul: case OpKind::kDiv:
      case OpKind::kMax: case OpKind::kMin: case OpKind::kPow:
        for (int i = 0; i < op.num_operands(); ++i) {
          if (!aligned_ok(i)) return -1;
        }
        break;
      case OpKind::kLayerNorm: case OpKind::kRmsNorm:
        if (map_.at(op.operand(0)).zigzag_dim != zigzag || zigzag == rank - 1) return -1;
        break;
      case OpKind::kSoftmax: {
        int64_t dim = op.attrs().GetInt("dim", -1);
        if (dim < 0) dim += rank;
        if (dim == zigzag) return -1;
        break;
      }
      case OpKind::kMatmul:
        // Rows of a: the result's rows are a's, one for one.
        if (map_.at(op.operand(0)).zigzag_dim != zigzag || zigzag != rank - 2 ||
            op.operand(0)->type().rank() != rank || op.attrs().GetBool("transpose_a", false) ||
            map_.at(op.operand(1)).zigzag_dim >= 0) {
          return -1;
        }
        break;
      case OpKind::kAttention:
        if (zigzag != 2) return -1;
        for (int i = 0; i < 3; ++i) {
          if (map_.at(op.operand(i)).zigzag_dim != 2) return -1;
        }
        break;
      default:
        return -1;
    }
    for (const Layout& result : choice.results) {
      if (result.rank() <= static_cast<size_t>(zigzag) || result.dims[zigzag] != *axes) return -1;
    }
    return zigzag;
  }

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
    int64_t zigzag = KeptZigzag(op, rule, choice);
    // A result annotated with another layout than the op makes is resharded, which the
    // zigzag order does not survive: such an op works on contiguous operands.
    for (int r = 0; r < op.num_results() && zigzag >= 0; ++r) {
      if (query.targets[r].has_value() && *query.targets[r] != choice.results[r]) zigzag = -1;
    }
    // Attention is position-dependent: it runs on the contiguous layout between two
    // exchanges, which ring-attention{zigzag=true} then removes.
    bool around = zigzag >= 0 && op.Is(OpKind::kAttention);

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
      if (m.zigzag_dim >= 0) {
        // A zigzag value: an op that does not keep the order (or attention) reads its
        // contiguous copy; earlier reshards of it are not reused.
        Value* source = m.value;
        if (zigzag < 0 || around) {
          COMMIR_ASSIGN_OR_RETURN(source, Contiguous(e, v));
        }
        COMMIR_ASSIGN_OR_RETURN(Value* local,
                                EmitReshard(e, source, Global(v), m.layout, choice.operands[i]));
        operands.push_back(local);
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
      if (around) {
        const AxisList& axes = choice.results[r].dims[zigzag];
        COMMIR_ASSIGN_OR_RETURN(local, EmitZigzagExchange(e, local, zigzag, axes, mesh_.GroupSize(axes),
                                                          ZigzagDirection::kToZigzag));
      }
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
      map_[result] = {final_value, target, zigzag, nullptr};
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
  if (HasCalls(function)) {
    // The partitioner sees one function at a time; the module-level entry inlines.
    std::string message = absl::StrCat("@", function.name(),
                                       " has calls: run 'inline' before partitioning it");
    if (diagnostics != nullptr) diagnostics->Error(function.loc(), message);
    return absl::FailedPreconditionError(message);
  }
  if (!function.mesh()->IsWellFormed()) {
    return absl::FailedPreconditionError(absl::StrCat("@", function.name(), ": invalid mesh"));
  }
  if (absl::Status s = Lowering(function, diagnostics).Run(); !s.ok()) return s;
  // A weight gradient summed over a data-parallel batch for a weight sharded over the
  // same axis: ZeRO's reduce_scatter rather than all_to_all + sum (sum_scatter.h).
  return FoldAllToAllIntoSums(function).status();
}

absl::Status LowerToSpmd(Module& module, DiagnosticEngine* diagnostics) {
  // Calls are expanded first: each function is then partitioned whole.
  if (absl::StatusOr<int64_t> inlined = InlineCalls(module, diagnostics); !inlined.ok()) {
    return inlined.status();
  }
  for (Function* function : module.functions()) {
    if (absl::Status s = LowerToSpmd(*function, diagnostics); !s.ok()) return s;
  }
  return absl::OkStatus();
}

const PassInfo& LowerToSpmdPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<LowerToSpmdPass>(
      "lower-to-spmd",
      "Partition global functions into spmd functions with explicit collectives"));
  return *info;
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
