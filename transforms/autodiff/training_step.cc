#include "transforms/autodiff/training_step.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "commir/builder.h"
#include "transforms/autodiff/autodiff.h"
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

}  // namespace

absl::StatusOr<Function*> BuildTrainingStep(Module& module, const Function& function,
                                            const TrainingStepOptions& options,
                                            DiagnosticEngine* diagnostics) {
  const std::string name = function.name() + "_step";
  if (module.FindFunction(name) != nullptr) {
    return Error(diagnostics, function.loc(), absl::StrCat("@", name, " exists already"));
  }
  if (!std::isfinite(options.learning_rate)) {
    return Error(diagnostics, function.loc(), "the learning rate must be a finite number");
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

  auto step = std::make_unique<Function>(name, /*is_spmd=*/false, function.loc());
  step->set_mesh_name(function.mesh_name(), function.mesh_name_loc());
  step->set_mesh(function.mesh());
  for (int i = 0; i < function.body()->num_arguments(); ++i) {
    Value* arg = function.body()->argument(i);
    step->AddArgument(function.arg_types()[i], arg->name(), arg->loc(),
                      function.arg_type_locs()[i]);
  }
  step->AddResult(function.result_types()[0]);
  for (int a : *params) step->AddResult(function.arg_types()[a]);
  step->RefreshArgumentTypes();

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
    from.argument(i)->ReplaceAllUsesWith(step->body()->argument(i));
  }

  OpBuilder b(step.get());
  b.set_loc(function.loc());
  std::vector<Value*> results = {loss};
  for (size_t i = 0; i < params->size(); ++i) {
    Value* param = step->body()->argument((*params)[i]);
    const ElementType update_type = gradients[i]->type().element_type();
    Value* scaled =
        b.Op(OpKind::kMul, {gradients[i], OpBuilder::Operand::Literal(options.learning_rate,
                                                                      Type::Scalar(update_type))});
    Value* updated = b.Op(OpKind::kSub, {b.Convert(param, update_type), scaled});
    Value* next = b.Convert(updated, param->type().element_type());
    if (next != nullptr) next->set_name(FreshName(*step, "new_" + param->name()));
    results.push_back(next);
  }
  if (!b.ok()) {
    return Error(diagnostics, function.loc(),
                 absl::StrCat("internal: the update of @", name, ": ", b.status().message()));
  }
  b.Return(results);
  // @f's other results, and what only they read, are not part of the step.
  EliminateDeadCode(*step);
  return module.InsertFunctionAfter(&function, std::move(step));
}

const OptionSchema<TrainingStepPassOptions>& TrainingStepPassOptions::Schema() {
  using O = TrainingStepPassOptions;
  static const auto* schema =
      &(*new OptionSchema<O>())
           .String("func", &O::func, "The function, e.g. @block (empty: every global function)")
           .String("params", &O::params,
                   "The trained arguments, e.g. \"w1,w2\" (required); their new values follow "
                   "the loss in argument order")
           .String("lr", &O::lr, "The learning rate")
           .Enum("grad-type", &O::grad_type, GradTypeSpellings(),
                 "Element type of the gradients and the update: same (each param's own) or "
                 "f32/f64 (an f32 update of bf16 params, rounded back)");
  return *schema;
}

const PassInfo& TrainingStepPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<TrainingStepPass>(
      "training-step",
      "Add @f_step to each global function @f: one SGD step returning the loss (@f's "
      "first result) and each trained param p - lr * dloss/dp"));
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
