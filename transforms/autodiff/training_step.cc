#include "transforms/autodiff/training_step.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/builder.h"
#include "transforms/autodiff/autodiff.h"
#include "transforms/autodiff/optimizer_update.h"
#include "transforms/autodiff/pass_options.h"
#include "transforms/dce.h"

namespace commir {
namespace {

absl::Status Error(DiagnosticEngine* diagnostics, Location loc, std::string message) {
  if (diagnostics != nullptr) diagnostics->Error(loc, message);
  return absl::FailedPreconditionError(message);
}

// The argument numbers of the trained params, in argument order.
absl::StatusOr<std::vector<int>> ParamIndices(const Function& function,
                                              const std::vector<std::string>& params,
                                              DiagnosticEngine* diagnostics) {
  if (params.empty()) {
    return Error(diagnostics, function.loc(),
                 absl::StrFormat("training-step needs the trained arguments of @%s, e.g. "
                                 "params=\"w1,w2\"",
                                 function.name()));
  }
  const Block& body = *function.body();
  std::vector<int> indices;
  for (const std::string& name : params) {
    int found = -1;
    for (int i = 0; i < body.num_arguments(); ++i) {
      if (body.argument(i)->name() == name) found = i;
    }
    if (found < 0) {
      return Error(diagnostics, function.loc(),
                   absl::StrFormat("params names %%%s, which @%s has no argument of", name,
                                   function.name()));
    }
    if (std::find(indices.begin(), indices.end(), found) != indices.end()) {
      return Error(diagnostics, function.loc(), absl::StrFormat("params names %%%s twice", name));
    }
    indices.push_back(found);
  }
  std::sort(indices.begin(), indices.end());
  return indices;
}

// A name for `base` not yet used in `function` (the printer needs distinct names).
std::string FreshName(const Function& function, const std::string& base) {
  absl::flat_hash_set<std::string> used;
  for (Value* arg : function.body()->arguments()) used.insert(arg->name());
  for (const Operation* op : *function.body()) {
    for (Value* r : op->results()) used.insert(r->name());
  }
  std::string name = base;
  for (int i = 1; used.contains(name); ++i) name = absl::StrCat(base, "_", i);
  return name;
}

// Whether `function` draws dropout masks (then the step needs a step count, see
// GiveDropoutsTheStep).
bool DrawsDropout(const Function& function) {
  for (const Operation* op : *function.body()) {
    if (op->Is(OpKind::kDropout)) return true;
  }
  return false;
}

// Every dropout of the step (the forward's and the backward's, which redraws the same
// mask) draws in step `step_count`: its step operand is the count as i64, so that step s
// draws a new mask under the seed the program text fixes, the same on every device and
// mesh (the count is a replicated scalar) and in the forward and backward of one step.
void GiveDropoutsTheStep(Function& step, Value* step_count) {
  Block& body = *step.body();
  OpBuilder b(&step);
  b.SetInsertionPoint(&body, body.front());
  b.set_loc(step.loc());
  Value* count = b.Convert(step_count, ElementType::kI64);
  if (count == nullptr) return;  // the builder has failed; the caller reports it
  count->set_name(FreshName(step, "dropout_step"));
  for (Operation* op : body) {
    if (!op->Is(OpKind::kDropout) || op->num_operands() != 1) continue;
    Value* operands[] = {op->operand(0), count};
    op->SetOperands(operands);
  }
}

// One value of the optimizer state: an argument of the step and, updated, a result.
struct OptimizerState {
  enum class Kind { kMaster, kM, kV, kStep };
  Kind kind;
  int param = -1;  // the index into the trained params (-1 for the step count)
  std::string name;
  Type type;
};

// AdamW's state for the trained params `params` of `function` (see training_step.h):
// masters, then first moments, then second moments, then the step count. Names avoid
// every name of `grad` (whose values move into the step).
std::vector<OptimizerState> AdamWState(const Function& function, const std::vector<int>& params,
                                       const Function& grad) {
  absl::flat_hash_set<std::string> used;
  for (Value* arg : grad.body()->arguments()) used.insert(arg->name());
  for (const Operation* op : *grad.body()) {
    for (Value* r : op->results()) used.insert(r->name());
  }
  auto fresh = [&](const std::string& base) {
    std::string name = base;
    for (int i = 1; used.contains(name) || used.contains("new_" + name); ++i) {
      name = absl::StrCat(base, "_", i);
    }
    used.insert(name);
    return name;
  };
  std::vector<OptimizerState> state;
  using Kind = OptimizerState::Kind;
  for (size_t i = 0; i < params.size(); ++i) {
    const Type& type = function.arg_types()[params[i]];
    if (ElementTypeByteWidth(type.element_type()) < 4) {
      state.push_back({Kind::kMaster, static_cast<int>(i),
                       fresh(function.body()->argument(params[i])->name() + "_master"),
                       type.WithElementType(ElementType::kF32)});
    }
  }
  for (Kind kind : {Kind::kM, Kind::kV}) {
    for (size_t i = 0; i < params.size(); ++i) {
      const Type& type = function.arg_types()[params[i]];
      const ElementType update =
          type.element_type() == ElementType::kF64 ? ElementType::kF64 : ElementType::kF32;
      state.push_back({kind, static_cast<int>(i),
                       fresh(function.body()->argument(params[i])->name() +
                             (kind == Kind::kM ? "_m" : "_v")),
                       type.WithElementType(update)});
    }
  }
  state.push_back({Kind::kStep, -1, fresh("step"), Type::Scalar(ElementType::kF32)});
  return state;
}

// The AdamW update of every trained param: appends the new params to `results` and the
// new state (in `state`'s order) to `new_state`.
void EmitAdamW(OpBuilder& b, const AdamWHyperparameters& h, const std::vector<int>& params,
               const std::vector<Value*>& gradients, const std::vector<OptimizerState>& state,
               const std::vector<Value*>& state_args, const Function& step,
               std::vector<Value*>& results, std::vector<Value*>& new_state) {
  using Kind = OptimizerState::Kind;
  auto find = [&](Kind kind, int param) -> Value* {
    for (size_t k = 0; k < state.size(); ++k) {
      if (state[k].kind == kind && state[k].param == param) return state_args[k];
    }
    return nullptr;
  };
  const AdamWStepScalars scalars = EmitAdamWStepScalars(b, find(Kind::kStep, -1), h);
  absl::flat_hash_map<ElementType, AdamWTypedScalars> typed;
  std::vector<AdamWParamUpdate> updates;
  for (size_t i = 0; i < params.size(); ++i) {
    const int p = static_cast<int>(i);
    Value* param = step.body()->argument(params[i]);
    Value* master = find(Kind::kMaster, p);
    // An f32 or f64 param is its own master; the moments have the update's type.
    Value* weight =
        master != nullptr ? master : b.Convert(param, find(Kind::kM, p)->type().element_type());
    if (weight == nullptr) break;  // the builder has failed
    const ElementType type = weight->type().element_type();
    if (!typed.contains(type)) typed[type] = ConvertAdamWStepScalars(b, scalars, type);
    updates.push_back(EmitAdamWUpdate(b, h, typed[type], weight, gradients[i],
                                      find(Kind::kM, p), find(Kind::kV, p)));
    Value* next = b.Convert(updates.back().weight, param->type().element_type());
    if (next != nullptr) next->set_name(FreshName(step, "new_" + param->name()));
    results.push_back(next);
  }
  if (updates.size() != params.size()) return;
  for (size_t k = 0; k < state.size(); ++k) {
    Value* value = nullptr;
    switch (state[k].kind) {
      case Kind::kMaster: value = updates[state[k].param].weight; break;
      case Kind::kM: value = updates[state[k].param].m; break;
      case Kind::kV: value = updates[state[k].param].v; break;
      case Kind::kStep: value = scalars.next_step; break;
    }
    // Named for the printed step (the new moments and masters are otherwise unnamed).
    if (value != nullptr && value->name().empty()) value->set_name("new_" + state[k].name);
    new_state.push_back(value);
  }
}

// @<step>_init(params...) -> (state...): the state before the first step, as
// torch.optim.AdamW creates it: masters are the params widened, moments and the step
// count zero. Its params are the trained params, in argument order.
absl::StatusOr<Function*> BuildStateInit(Module& module, const Function& step,
                                         const Function& function, const std::vector<int>& params,
                                         const std::vector<OptimizerState>& state) {
  auto init = std::make_unique<Function>(step.name() + "_init", /*is_spmd=*/false,
                                         function.loc());
  init->set_mesh_name(function.mesh_name(), function.mesh_name_loc());
  init->set_mesh(function.mesh());
  for (int a : params) {
    Value* arg = function.body()->argument(a);
    init->AddArgument(function.arg_types()[a], arg->name(), arg->loc(),
                      function.arg_type_locs()[a]);
  }
  for (const OptimizerState& s : state) init->AddResult(s.type);
  init->RefreshArgumentTypes();
  OpBuilder b(init.get());
  b.set_loc(function.loc());
  std::vector<Value*> values;
  for (const OptimizerState& s : state) {
    Value* value = nullptr;
    if (s.kind == OptimizerState::Kind::kMaster) {
      value = b.Convert(init->body()->argument(s.param), ElementType::kF32);
    } else {
      AttrDict attrs;
      attrs.Set("value", Attribute::Float(0));
      value = b.Op(OpKind::kFull, {}, std::move(attrs), s.type);
    }
    if (value != nullptr) value->set_name(s.name);
    values.push_back(value);
  }
  if (!b.ok()) {
    return absl::InternalError(
        absl::StrCat("internal: @", init->name(), ": ", b.status().message()));
  }
  b.Return(values);
  return module.InsertFunctionAfter(&step, std::move(init));
}

}  // namespace

absl::StatusOr<Function*> BuildTrainingStep(Module& module, const Function& function,
                                            const TrainingStepOptions& options,
                                            DiagnosticEngine* diagnostics) {
  const std::string name = function.name() + "_step";
  const bool adamw = options.adamw.has_value();
  // A step that draws dropout counts its steps (AdamW counts them anyway), so that each
  // draws a new mask; the count is state, with @f_step_init.
  const bool dropout = DrawsDropout(function);
  const bool has_state = adamw || dropout;
  for (const std::string& taken : {name, name + "_init"}) {
    if ((taken == name || has_state) && module.FindFunction(taken) != nullptr) {
      return Error(diagnostics, function.loc(), absl::StrCat("@", taken, " exists already"));
    }
  }
  if (!std::isfinite(options.learning_rate)) {
    return Error(diagnostics, function.loc(), "the learning rate must be a finite number");
  }
  if (options.clip_grad_norm.has_value() &&
      !(std::isfinite(*options.clip_grad_norm) && *options.clip_grad_norm > 0)) {
    return Error(diagnostics, function.loc(),
                 absl::StrFormat("clip_grad_norm must be a finite number above 0, got %g",
                                 *options.clip_grad_norm));
  }
  if (adamw) {
    if (absl::Status s = CheckAdamW(*options.adamw); !s.ok()) {
      return Error(diagnostics, function.loc(), std::string(s.message()));
    }
  }
  absl::StatusOr<std::vector<int>> params = ParamIndices(function, options.params, diagnostics);
  if (!params.ok()) return params.status();

  // The gradient function is built in a scratch module, so that @f_grad never appears in
  // `module`; its ops then move into @f_step.
  AutodiffOptions ad;
  for (int a : *params) ad.wrt.push_back(function.body()->argument(a)->name());
  ad.grad_type = options.grad_type;
  Module scratch;
  absl::StatusOr<Function*> grad = Differentiate(scratch, function, ad, diagnostics);
  if (!grad.ok()) return grad.status();

  // The optimizer state's arguments (AdamW), named apart from every name of the
  // gradient function, whose values move into the step.
  std::vector<OptimizerState> state;
  if (adamw) {
    state = AdamWState(function, *params, **grad);
  } else if (dropout) {
    state.push_back({OptimizerState::Kind::kStep, -1, FreshName(**grad, "step"),
                     Type::Scalar(ElementType::kF32)});
  }

  auto step = std::make_unique<Function>(name, /*is_spmd=*/false, function.loc());
  step->set_mesh_name(function.mesh_name(), function.mesh_name_loc());
  step->set_mesh(function.mesh());
  const int state_at = params->back() + 1;  // the state follows the last trained param
  std::vector<Value*> state_args;
  for (int i = 0; i < function.body()->num_arguments(); ++i) {
    if (i == state_at) {
      for (const OptimizerState& s : state) {
        step->AddArgument(s.type, s.name, function.loc(), function.loc());
      }
    }
    Value* arg = function.body()->argument(i);
    step->AddArgument(function.arg_types()[i], arg->name(), arg->loc(),
                      function.arg_type_locs()[i]);
  }
  if (state_at == function.body()->num_arguments()) {
    for (const OptimizerState& s : state) {
      step->AddArgument(s.type, s.name, function.loc(), function.loc());
    }
  }
  step->AddResult(function.result_types()[0]);
  for (int a : *params) step->AddResult(function.arg_types()[a]);
  for (const OptimizerState& s : state) step->AddResult(s.type);
  step->RefreshArgumentTypes();
  for (size_t k = 0; k < state.size(); ++k) {
    state_args.push_back(step->body()->argument(state_at + static_cast<int>(k)));
  }
  // @f's argument i is the step's argument step_argument(i).
  auto step_argument = [&](int i) {
    return step->body()->argument(i < state_at ? i : i + static_cast<int>(state.size()));
  };

  // @f_grad returns (@f's results..., one gradient per param).
  Block& from = *(*grad)->body();
  Operation* ret = from.terminator();
  const int num_results = static_cast<int>(function.result_types().size());
  Value* loss = ret->operand(0);
  std::vector<Value*> gradients;
  for (size_t i = 0; i < params->size(); ++i) gradients.push_back(ret->operand(num_results + i));
  ret->Erase();
  while (Operation* op = from.front()) {
    if (op->num_regions() > 0) {
      return Error(diagnostics, op->loc(),
                   absl::StrFormat("internal: the gradient of @%s has '%s' with a body",
                                   function.name(), op->name()));
    }
    step->body()->Append(from.Remove(op));
  }
  for (int i = 0; i < from.num_arguments(); ++i) {
    from.argument(i)->ReplaceAllUsesWith(step_argument(i));
  }

  if (dropout) GiveDropoutsTheStep(*step, state_args.back());
  OpBuilder b(step.get());
  b.set_loc(function.loc());
  if (options.clip_grad_norm.has_value()) {
    gradients = ClipByGlobalNorm(b, gradients, *options.clip_grad_norm);
  }
  std::vector<Value*> results = {loss};
  std::vector<Value*> new_state;
  if (adamw) {
    EmitAdamW(b, *options.adamw, *params, gradients, state, state_args, *step, results,
              new_state);
  } else {
    for (size_t i = 0; i < params->size(); ++i) {
      Value* param = step_argument((*params)[i]);
      const ElementType update_type = gradients[i]->type().element_type();
      Value* scaled = b.Op(OpKind::kMul, {gradients[i], OpBuilder::Operand::Literal(
                                                            options.learning_rate,
                                                            Type::Scalar(update_type))});
      Value* updated = b.Op(OpKind::kSub, {b.Convert(param, update_type), scaled});
      Value* next = b.Convert(updated, param->type().element_type());
      if (next != nullptr) next->set_name(FreshName(*step, "new_" + param->name()));
      results.push_back(next);
    }
    if (dropout) {  // SGD's only state: the step count
      Value* next = b.Op(OpKind::kAdd, {state_args.back(), OpBuilder::Operand::Literal(
                                                               1, Type::Scalar(ElementType::kF32))});
      if (next != nullptr) next->set_name(FreshName(*step, "new_" + state.back().name));
      new_state.push_back(next);
    }
  }
  results.insert(results.end(), new_state.begin(), new_state.end());
  if (!b.ok()) {
    return Error(diagnostics, function.loc(),
                 absl::StrCat("internal: the update of @", name, ": ", b.status().message()));
  }
  b.Return(results);
  // @f's other results, and what only they read, are not part of the step.
  EliminateDeadCode(*step);
  Function* built = module.InsertFunctionAfter(&function, std::move(step));
  if (has_state) {
    absl::StatusOr<Function*> init = BuildStateInit(module, *built, function, *params, state);
    if (!init.ok()) return Error(diagnostics, function.loc(), std::string(init.status().message()));
  }
  return built;
}

const OptionSchema<TrainingStepPassOptions>& TrainingStepPassOptions::Schema() {
  using O = TrainingStepPassOptions;
  static const auto* schema =
      &(*new OptionSchema<O>())
           .String("func", &O::func, "The function, e.g. @block (empty: every global function)")
           .String("params", &O::params,
                   "The trained arguments, e.g. \"w1,w2\" (required); their new values follow "
                   "the loss in argument order")
           .String("lr", &O::lr, "The learning rate of sgd (adamw has its own)")
           .Enum("grad-type", &O::grad_type, GradTypeSpellings(),
                 "Element type of the gradients: same (each param's own) or f32/f64 (with "
                 "sgd, an f32 update of bf16 params, rounded back)")
           .Choice("optimizer", &O::optimizer,
                   "sgd (p - lr * g) or adamw{...}, torch.optim.AdamW: the moments, the step "
                   "count and f32 master weights of bf16 params are state, arguments after "
                   "the last trained param and results after the new params; "
                   "@f_step_init(params) gives their first values")
           .Number("clip_grad_norm", &O::clip_grad_norm,
                   "Scale the gradients by min(1, C / (norm + 1e-6)), norm their global "
                   "2-norm, as torch.nn.utils.clip_grad_norm_ (0: no clipping)",
                   0.0);
  return *schema;
}

const PassInfo& TrainingStepPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<TrainingStepPass>(
      "training-step",
      "Add @f_step to each global function @f: one SGD or AdamW step returning the loss "
      "(@f's first result), each trained param's new value and the optimizer's new state"));
  return *info;
}

absl::Status TrainingStepPass::Run(Module& module) {
  TrainingStepOptions step;
  absl::StatusOr<std::vector<std::string>> params =
      ValueNameList(options().params, "training-step", "params");
  if (!params.ok()) return params.status();
  step.params = *std::move(params);
  const std::string& lr = options().lr;
  if (!absl::SimpleAtod(lr, &step.learning_rate) || !std::isfinite(step.learning_rate)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("training-step: lr must be a finite number, got '%s'", lr));
  }
  step.grad_type = GradElementType(options().grad_type);
  if (const auto* adamw = std::get_if<AdamWOptimizerOption>(&options().optimizer)) {
    // `lr` is SGD's: with adamw it would be silently ignored.
    if (lr != TrainingStepPassOptions{}.lr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "training-step: lr is sgd's learning rate; give adamw its own, "
          "optimizer=adamw{lr=%s}",
          lr));
    }
    step.adamw = *adamw;
  }
  if (options().clip_grad_norm > 0) step.clip_grad_norm = options().clip_grad_norm;

  absl::StatusOr<std::vector<Function*>> picked =
      PickFunctions(module, options().func, "training-step");
  if (!picked.ok()) return picked.status();
  for (Function* f : *picked) {
    absl::StatusOr<Function*> built = BuildTrainingStep(module, *f, step, &diagnostics());
    if (!built.ok()) return built.status();
  }
  AddToStatistic("functions", "Training step functions added", static_cast<int64_t>(picked->size()));
  return absl::OkStatus();
}

}  // namespace commir
