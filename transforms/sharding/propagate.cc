#include "transforms/sharding/propagate.h"

#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "transforms/sharding/layout.h"
#include "transforms/sharding/op_rules.h"
#include "transforms/sharding/strategy_explanation.h"

namespace commir::sharding {
namespace {

// The layout the parser infers for an elementwise op's result from its operands.
std::optional<Type> InferredElementwiseType(const Operation& op, const Mesh* mesh) {
  if (op.Is(OpKind::kConvert)) {
    Type x = op.operand(0)->type();
    if (!x.is_tensor()) return std::nullopt;
    return op.result(0)->type().WithSharding(x.dim_axes(), x.partial());
  }
  std::vector<Type> operand_types;
  for (Value* v : op.operands()) operand_types.push_back(v->type());
  OpSignature sig{operand_types, op.attrs(), {}, 1, mesh, false};
  absl::StatusOr<std::vector<Type>> inferred = op.def().infer(sig);
  if (!inferred.ok() || inferred->size() != 1) return std::nullopt;
  return (*inferred)[0];
}

}  // namespace

bool IsLayoutConstraint(const Operation& op, int r) {
  Type type = op.result(r)->type();
  if (!type.is_tensor()) return false;
  if (op.Is(OpKind::kReshard)) return true;
  if (!type.has_sharding()) return false;
  if (op.def().Has(kElementwise) && op.num_results() == 1) {
    const Function* function = op.parent_function();
    std::optional<Type> inferred =
        InferredElementwiseType(op, function != nullptr ? function->mesh() : nullptr);
    if (inferred && inferred->is_tensor() && inferred->dim_axes() == type.dim_axes() &&
        inferred->partial() == type.partial()) {
      return false;
    }
  }
  return true;
}

namespace {

class Propagator {
 public:
  Propagator(Function& function, const PropagationOptions& options, DiagnosticEngine* diagnostics)
      : function_(function),
        mesh_(*function.mesh()),
        options_(options),
        diagnostics_(diagnostics) {}

  absl::Status Run() {
    Block& body = *function_.body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      Info& info = info_[body.argument(i)];
      info.layout = Layout::Of(function_.arg_types()[i], mesh_);
      info.fixed = info.decided = true;
    }
    for (Operation* op : body) {
      if (op->def().Has(kTerminator)) {
        ret_ = op;
        continue;
      }
      absl::StatusOr<OpRule> rule = RuleFor(*op);
      if (!rule.ok()) {
        if (diagnostics_ != nullptr) diagnostics_->Error(op->loc(), std::string(rule.status().message()));
        return absl::FailedPreconditionError(rule.status().message());
      }
      ops_.push_back(op);
      rules_.push_back(*std::move(rule));
      for (int r = 0; r < op->num_results(); ++r) {
        Value* result = op->result(r);
        if (!result->type().is_tensor()) continue;
        Info& info = info_[result];
        if (IsLayoutConstraint(*op, r)) {
          info.layout = Layout::Of(result->type(), mesh_);
          info.fixed = info.decided = true;
        }
      }
    }
    for (int round = 0; round < std::max(1, options_.iterations); ++round) {
      Backward();
      Forward();
    }
    if (options_.report != nullptr) Explain(*options_.report);
    for (Operation* op : ops_) {
      for (Value* result : op->results()) {
        auto it = info_.find(result);
        if (it == info_.end() || it->second.fixed) continue;
        Type type = it->second.layout.ApplyTo(result->type());
        if (options_.report != nullptr) {
          ++options_.report->free_values;
          options_.report->layouts_changed += type != result->type() ? 1 : 0;
        }
        result->set_type(type);
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Info {
    Layout layout;
    bool fixed = false;
    bool decided = false;
    std::optional<Layout> preferred;
    int strength = -1;
  };

  Info* Find(const Value* value) {
    auto it = info_.find(value);
    return it == info_.end() ? nullptr : &it->second;
  }

  void Vote(const Value* value, const Layout& layout, int strength) {
    Info* info = Find(value);
    if (info == nullptr || info->fixed || value->is_literal()) return;
    if (strength >= info->strength) {
      info->preferred = layout;
      info->strength = strength;
    }
  }

  StrategyQuery Query(size_t k) {
    Operation* op = ops_[k];
    StrategyQuery query;
    query.op = op;
    query.rule = &rules_[k];
    query.mesh = &mesh_;
    for (Value* v : op->operands()) {
      Info* info = v->is_literal() ? nullptr : Find(v);
      query.operands.push_back(info != nullptr && info->decided ? std::optional<Layout>(info->layout)
                                                                : std::nullopt);
    }
    for (Value* result : op->results()) {
      Info* info = Find(result);
      if (info == nullptr) {
        query.targets.push_back(std::nullopt);
      } else if (info->fixed) {
        query.targets.push_back(info->layout);
      } else {
        query.targets.push_back(info->preferred);
      }
    }
    return query;
  }

  void Backward() {
    for (auto& [value, info] : info_) {
      info.preferred.reset();
      info.strength = -1;
    }
    if (ret_ != nullptr) {
      for (int i = 0; i < ret_->num_operands(); ++i) {
        Vote(ret_->operand(i), Layout::Of(function_.result_types()[i], mesh_), 2);
      }
    }
    for (size_t k = ops_.size(); k-- > 0;) {
      Operation* op = ops_[k];
      StrategyQuery query = Query(k);
      int strength = -1;
      for (Value* result : op->results()) {
        const Info* info = Find(result);
        if (info == nullptr) continue;
        if (info->fixed) {
          strength = 2;
        } else if (info->preferred) {
          strength = std::max(strength, info->strength);
        }
      }
      bool any_known = false;
      for (const std::optional<Layout>& layout : query.operands) any_known |= layout.has_value();
      if (strength < 0 && !any_known) continue;
      bool any_free = false;
      for (Value* v : op->operands()) {
        const Info* info = v->is_literal() ? nullptr : Find(v);
        any_free |= info != nullptr && !info->fixed;
      }
      if (!any_free) continue;
      Choice choice = ChooseStrategy(query);
      for (int i = 0; i < op->num_operands(); ++i) {
        if (!rules_[k].operands[i].is_tensor) continue;
        Vote(op->operand(i), choice.operands[i], std::max(strength, 0));
      }
    }
  }

  // Explains the ops that define a value named in options_.explain. Run after the last
  // round: every layout a query reads was set before its op's turn in the last forward
  // round and not changed since, so the query (and so the choice) is the one made there.
  void Explain(PropagationReport& report) {
    if (options_.explain.empty()) return;
    for (size_t k = 0; k < ops_.size(); ++k) {
      const Operation& op = *ops_[k];
      bool named = false;
      for (const Value* result : op.results()) {
        for (const std::string& name : options_.explain) {
          if (result->name() != name) continue;
          named = true;
          report.explained_names.insert(name);
        }
      }
      if (!named) continue;
      StrategyQuery query = Query(k);
      report.explanations.push_back(
          {op.loc(), ExplainStrategyChoice(query, WeighStrategies(query), function_.name())});
    }
  }

  void Forward() {
    for (size_t k = 0; k < ops_.size(); ++k) {
      Operation* op = ops_[k];
      StrategyQuery query = Query(k);
      Choice choice = ChooseStrategy(query);
      for (int r = 0; r < op->num_results(); ++r) {
        Info* info = Find(op->result(r));
        if (info == nullptr || info->fixed) continue;
        Layout layout = choice.results[r];
        if (!layout.partial.empty() && layout.partial_kind == ReductionFn::kMax) {
          Layout target = query.targets[r] ? *query.targets[r] : Layout::Replicated(layout.rank());
          if (!target.partial.empty()) target.partial.clear();
          layout = ReducePartial(layout, target, mesh_);
        }
        info->layout = std::move(layout);
        info->decided = true;
      }
    }
  }

  Function& function_;
  const Mesh& mesh_;
  PropagationOptions options_;
  DiagnosticEngine* diagnostics_;
  std::vector<Operation*> ops_;
  std::vector<OpRule> rules_;
  Operation* ret_ = nullptr;
  absl::flat_hash_map<const Value*, Info> info_;
};

}  // namespace

absl::Status PropagateSharding(Function& function, const PropagationOptions& options,
                               DiagnosticEngine* diagnostics) {
  if (function.is_spmd() || function.mesh() == nullptr) return absl::OkStatus();
  return Propagator(function, options, diagnostics).Run();
}

absl::Status PropagateSharding(Module& module, const PropagationOptions& options,
                               DiagnosticEngine* diagnostics) {
  for (Function* function : module.functions()) {
    if (absl::Status s = PropagateSharding(*function, options, diagnostics); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("@", function->name(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

namespace {

// The first global function with a mesh that has an argument named `name`, or null.
const Function* GlobalFunctionWithArgument(const Module& module, absl::string_view name) {
  for (const Function* function : module.functions()) {
    if (function->is_spmd() || function->mesh() == nullptr) continue;
    const Block& body = *function->body();
    for (int i = 0; i < body.num_arguments(); ++i) {
      if (body.argument(i)->name() == name) return function;
    }
  }
  return nullptr;
}

}  // namespace

absl::Status PropagateShardingPass::Run(Module& module) {
  PropagationOptions propagation;
  PropagationReport report;
  propagation.report = &report;
  if (options().Has("explain")) {
    for (absl::string_view name :
         absl::StrSplit(options().GetString("explain"), absl::ByAnyChar(", "), absl::SkipEmpty())) {
      propagation.explain.push_back(std::string(absl::StripPrefix(name, "%")));
    }
  }
  if (options().Has("iterations")) {
    int64_t iterations = options().GetInt("iterations");
    if (iterations < 1 || iterations > 100) {
      return absl::InvalidArgumentError(
          absl::StrCat("option 'iterations' must be between 1 and 100, got ", iterations));
    }
    propagation.iterations = static_cast<int>(iterations);
  }
  if (absl::Status s = PropagateSharding(module, propagation, &diagnostics()); !s.ok()) return s;
  for (const std::string& name : propagation.explain) {
    if (report.explained_names.contains(name)) continue;
    if (const Function* function = GlobalFunctionWithArgument(module, name)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "explain: %%%s is an argument of @%s: its layout is given, not chosen", name,
          function->name()));
    }
    return absl::InvalidArgumentError(
        absl::StrFormat("explain: no value %%%s in a global function with a mesh", name));
  }
  for (const PropagationReport::Explanation& explanation : report.explanations) {
    Remark(absl::StrCat("propagate-sharding: ", explanation.text), explanation.loc);
  }
  const std::string global = NameFunctions(
      module, [](const Function& f) { return !f.is_spmd() && f.mesh() != nullptr; });
  AddToStatistic("rewrites", "Free values whose layout changed", report.layouts_changed);
  AddToStatistic("free-values", "Values whose layout propagation chose", report.free_values);
  // Free values that keep the layout the parser inferred are routine; a module with
  // nothing to propagate over is worth saying (a pipeline run on the wrong program).
  if (global.empty()) RemarkRewroteNothing("no global function with a mesh");
  return absl::OkStatus();
}

}  // namespace commir::sharding
