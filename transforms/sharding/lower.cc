#include "transforms/sharding/lower.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "commir/attention_op.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/op_rules.h"

namespace commir::sharding {
namespace {

using Operand = Emitter::Operand;

AttrDict KeepdimReduceAttrs(int64_t dim) {
  AttrDict attrs;
  attrs.Set("dims", Attribute::IntList({dim}));
  attrs.Set("keepdim", Attribute::Bool(true));
  return attrs;
}

AttrDict ReduceOver(const AxisList& axes, bool max) {
  AttrDict attrs = AxisAttrs(axes);
  if (max) attrs.Set("reduce", Attribute::Ident("max"));
  return attrs;
}

// The element type statistics are computed in: f64 for f64, f32 otherwise (as the
// kernels do).
ElementType ComputeType(ElementType type) {
  return type == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
}

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
    Emitter emitter(&function_, body, old_return);
    for (int i = 0; i < body->num_arguments(); ++i) {
      map_[body->argument(i)] = {body->argument(i), Layout::Of(function_.arg_types()[i], mesh_)};
    }
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

  absl::Status LowerBody(Emitter& emitter, const std::vector<Operation*>& old_ops,
                         const std::vector<OpRule>& rules, Operation* old_return) {
    for (size_t k = 0; k < old_ops.size(); ++k) {
      if (absl::Status s = LowerOp(emitter, *old_ops[k], rules[k]); !s.ok()) {
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

  absl::Status LowerOp(Emitter& e, const Operation& op, const OpRule& rule) {
    e.set_loc(op.loc());
    StrategyQuery query;
    query.op = &op;
    query.rule = &rule;
    query.mesh = &mesh_;
    for (int i = 0; i < op.num_operands(); ++i) {
      Value* v = op.operand(i);
      query.operand_types.push_back(Global(v));
      if (rule.operands[i].is_tensor) {
        query.operands.push_back(map_.at(v).layout);
      } else {
        query.operands.push_back(std::nullopt);
      }
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
      absl::StatusOr<Value*> local = EmitReshard(e, m.value, Global(v), m.layout, choice.operands[i]);
      if (!local.ok()) return local.status();
      operands.push_back(*local);
    }

    absl::StatusOr<std::vector<Value*>> natural = EmitLocal(e, op, rule, choice, operands);
    if (!natural.ok()) return natural.status();
    for (int r = 0; r < op.num_results(); ++r) {
      Value* result = op.result(r);
      Value* local = (*natural)[r];
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
      absl::StatusOr<Value*> final_value =
          EmitReshard(e, local, result->type(), choice.results[r], target, result->name());
      if (!final_value.ok()) return final_value.status();
      if (*final_value == local && !existed) local->set_name(result->name());
      map_[result] = {*final_value, target};
    }
    return absl::OkStatus();
  }

  // The per-device op(s) for `op` on operands already laid out as `choice` needs; returns
  // its results laid out as choice.results.
  absl::StatusOr<std::vector<Value*>> EmitLocal(Emitter& e, const Operation& op, const OpRule& rule,
                                                const Choice& choice,
                                                const std::vector<Operand>& operands) {
    const Strategy& s = choice.strategy;
    switch (op.kind()) {
      case OpKind::kReshard: return std::vector<Value*>{operands[0].value};
      case OpKind::kSoftmax: {
        int64_t dim = op.IntAttr("dim");
        if (dim < 0) dim += Global(op.operand(0)).rank();
        const AxisList& axes = s.factors[rule.operands[0].dims[dim][0]];
        if (!axes.empty()) return One(Softmax(e, operands[0].value, dim, axes));
        break;
      }
      case OpKind::kLayerNorm:
      case OpKind::kRmsNorm: {
        int64_t last = Global(op.operand(0)).rank() - 1;
        const AxisList& axes = s.factors[rule.operands[0].dims[last][0]];
        if (!axes.empty()) return One(Norm(e, op, operands, axes));
        break;
      }
      case OpKind::kReduceMean: {
        bool split = false;
        for (int f = 0; f < rule.num_factors(); ++f) {
          split |= rule.kinds[f] == FactorKind::kSum && !s.factors[f].empty();
        }
        if (split) return One(SplitMean(e, op, operands));
        break;
      }
      case OpKind::kAttention: {
        const AxisList& axes = s.factors[rule.operands[0].dims[2][0]];
        if (!axes.empty() && op.BoolAttr("causal")) {
          return Attention(e, op, operands, axes);
        }
        break;
      }
      default: break;
    }
    AttrDict attrs = op.attrs();
    if (op.Is(OpKind::kSlice)) {
      attrs.Set("size", Attribute::IntList(LocalTypeOf(op.result(0)->type(), choice.results[0], mesh_).dims()));
    }
    std::vector<Type> annotated;
    if (op.def().Has(kResultTypeRequired) || op.Is(OpKind::kMatmul)) {
      for (int r = 0; r < op.num_results(); ++r) {
        annotated.push_back(LocalTypeOf(op.result(r)->type(), choice.results[r], mesh_));
      }
    }
    absl::StatusOr<Operation*> local = e.Create(op.kind(), operands, attrs, annotated, op.num_results());
    if (!local.ok()) return local.status();
    return (*local)->results();
  }

  static absl::StatusOr<std::vector<Value*>> One(absl::StatusOr<Value*> value) {
    if (!value.ok()) return value.status();
    return std::vector<Value*>{*value};
  }

  static absl::StatusOr<Value*> Convert(Emitter& e, Value* x, ElementType type) {
    if (x->type().element_type() == type) return x;
    Type to[] = {x->type().WithElementType(type)};
    return e.Value1(OpKind::kConvert, {x}, {}, to);
  }

  // softmax over a split dim: max and sum combined across the dim's axes.
  absl::StatusOr<Value*> Softmax(Emitter& e, Value* x, int64_t dim, const AxisList& axes) {
    ElementType type = x->type().element_type();
    absl::StatusOr<Value*> xf = Convert(e, x, ComputeType(type));
    if (!xf.ok()) return xf;
    absl::StatusOr<Value*> local_max = e.Value1(OpKind::kReduceMax, {*xf}, KeepdimReduceAttrs(dim));
    if (!local_max.ok()) return local_max;
    absl::StatusOr<Value*> row_max = e.Value1(OpKind::kAllReduce, {*local_max}, ReduceOver(axes, true));
    if (!row_max.ok()) return row_max;
    absl::StatusOr<Value*> shifted = e.Value1(OpKind::kSub, {*xf, *row_max});
    if (!shifted.ok()) return shifted;
    absl::StatusOr<Value*> exps = e.Value1(OpKind::kExp, {*shifted});
    if (!exps.ok()) return exps;
    absl::StatusOr<Value*> local_sum = e.Value1(OpKind::kReduceSum, {*exps}, KeepdimReduceAttrs(dim));
    if (!local_sum.ok()) return local_sum;
    absl::StatusOr<Value*> row_sum = e.Value1(OpKind::kAllReduce, {*local_sum}, ReduceOver(axes, false));
    if (!row_sum.ok()) return row_sum;
    absl::StatusOr<Value*> y = e.Value1(OpKind::kDiv, {*exps, *row_sum});
    if (!y.ok()) return y;
    return Convert(e, *y, type);
  }

  // layernorm / rmsnorm over a split last dim: the row statistics combined across the
  // dim's axes, two-pass for layernorm like the kernel.
  absl::StatusOr<Value*> Norm(Emitter& e, const Operation& op, const std::vector<Operand>& operands,
                              const AxisList& axes) {
    Value* x = operands[0].value;
    ElementType type = x->type().element_type();
    ElementType ct = ComputeType(type);
    Type scalar = Type::Scalar(ct);
    int64_t last = x->type().rank() - 1;
    double n = static_cast<double>(Global(op.operand(0)).dims().back());
    bool layer = op.Is(OpKind::kLayerNorm);
    double eps = op.NumberAttr("eps");
    absl::StatusOr<Value*> xf = Convert(e, x, ct);
    if (!xf.ok()) return xf;
    absl::StatusOr<Value*> weight = Convert(e, operands[1].value, ct);
    if (!weight.ok()) return weight;
    // Row sum of `v` over the whole dim, divided by its global length.
    auto row_mean = [&](Value* v) -> absl::StatusOr<Value*> {
      absl::StatusOr<Value*> local = e.Value1(OpKind::kReduceSum, {v}, KeepdimReduceAttrs(last));
      if (!local.ok()) return local;
      absl::StatusOr<Value*> total = e.Value1(OpKind::kAllReduce, {*local}, ReduceOver(axes, false));
      if (!total.ok()) return total;
      return e.Value1(OpKind::kDiv, {*total, Operand::Literal(n, scalar)});
    };
    Value* centered = *xf;
    if (layer) {
      absl::StatusOr<Value*> mean = row_mean(*xf);
      if (!mean.ok()) return mean;
      absl::StatusOr<Value*> c = e.Value1(OpKind::kSub, {*xf, *mean});
      if (!c.ok()) return c;
      centered = *c;
    }
    absl::StatusOr<Value*> squares = e.Value1(OpKind::kMul, {centered, centered});
    if (!squares.ok()) return squares;
    absl::StatusOr<Value*> variance = row_mean(*squares);
    if (!variance.ok()) return variance;
    absl::StatusOr<Value*> shifted = e.Value1(OpKind::kAdd, {*variance, Operand::Literal(eps, scalar)});
    if (!shifted.ok()) return shifted;
    absl::StatusOr<Value*> inverse = e.Value1(OpKind::kRsqrt, {*shifted});
    if (!inverse.ok()) return inverse;
    absl::StatusOr<Value*> y = e.Value1(OpKind::kMul, {centered, *inverse});
    if (!y.ok()) return y;
    y = e.Value1(OpKind::kMul, {*y, *weight});
    if (!y.ok()) return y;
    if (layer) {
      absl::StatusOr<Value*> bias = Convert(e, operands[2].value, ct);
      if (!bias.ok()) return bias;
      y = e.Value1(OpKind::kAdd, {*y, *bias});
      if (!y.ok()) return y;
    }
    return Convert(e, *y, type);
  }

  // reduce_mean over split dims: the local sum divided by the global count, partial.
  absl::StatusOr<Value*> SplitMean(Emitter& e, const Operation& op, const std::vector<Operand>& operands) {
    Value* x = operands[0].value;
    absl::StatusOr<Value*> sum = e.Value1(OpKind::kReduceSum, {x}, op.attrs());
    if (!sum.ok()) return sum;
    Type global = Global(op.operand(0));
    double count = 1;
    for (int64_t d : op.attrs().Find("dims")->int_list().value_or(std::vector<int64_t>{})) {
      count *= static_cast<double>(global.dims()[d < 0 ? d + global.rank() : d]);
    }
    return e.Value1(OpKind::kDiv,
                    {*sum, Operand::Literal(count, Type::Scalar(global.element_type()))});
  }

  // Causal attention with the query sequence split over `axes`: each device's queries
  // sit at q_pos + rank(axes) * Sq_local.
  absl::StatusOr<std::vector<Value*>> Attention(Emitter& e, const Operation& op,
                                                const std::vector<Operand>& operands,
                                                const AxisList& axes) {
    int64_t local_queries = operands[0].value->type().dims()[2];
    int64_t queries = Global(op.operand(0)).dims()[2];
    int64_t keys = Global(op.operand(1)).dims()[2];
    absl::StatusOr<Value*> rank = e.Value1(OpKind::kRank, {}, AxisAttrs(axes));
    if (!rank.ok()) return rank.status();
    absl::StatusOr<Value*> offset = *rank;
    if (local_queries != 1) {
      offset = e.Value1(OpKind::kMul, {*rank, Operand::Literal(static_cast<double>(local_queries),
                                                                  Type::Index())});
      if (!offset.ok()) return offset.status();
    }
    absl::StatusOr<Value*> q_pos = *offset;
    const AttentionOp view(op);
    if (view.q_pos() != nullptr) {
      q_pos = e.Value1(OpKind::kAdd, {operands[AttentionOp::kQPos], *offset});
    } else if (keys != queries) {
      q_pos = e.Value1(OpKind::kAdd, {*offset, Operand::Literal(static_cast<double>(keys - queries),
                                                                Type::Index())});
    }
    if (!q_pos.ok()) return q_pos.status();
    (*q_pos)->set_name("q_pos");
    std::vector<Operand> local = {operands[AttentionOp::kQ], operands[AttentionOp::kK],
                                  operands[AttentionOp::kV], *q_pos};
    if (view.k_pos() != nullptr) local.push_back(operands[AttentionOp::kKPos]);
    absl::StatusOr<Operation*> attention =
        e.Create(OpKind::kAttention, local, op.attrs(), {}, op.num_results());
    if (!attention.ok()) return attention.status();
    return (*attention)->results();
  }

  Function& function_;
  const Mesh& mesh_;
  DiagnosticEngine* diagnostics_;
  absl::flat_hash_map<const Value*, Mapped> map_;
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

absl::Status LowerToSpmdPass::Run(Module& module) { return LowerToSpmd(module, &diagnostics()); }

}  // namespace commir::sharding
