#include "transforms/autodiff/autodiff.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "commir/builder.h"
#include "commir/clone.h"
#include "commir/ops/vjp_helpers.h"
#include "transforms/autodiff/pass_options.h"
#include "transforms/autodiff/slice_tiling.h"
#include "transforms/dce.h"

namespace commir {
namespace {

bool IsFloatTensor(Type type) { return !type.is_index() && IsFloatType(type.element_type()); }

// Builds one gradient function.
class GradientBuilder {
 public:
  GradientBuilder(Module& module, const Function& function, const AutodiffOptions& options,
                  DiagnosticEngine* diagnostics)
      : module_(module), source_(function), options_(options), diagnostics_(diagnostics) {}

  // The backward's reads of the forward; filled by Build.
  const absl::flat_hash_map<const Value*, std::vector<BackwardRead>>& saved() const {
    return saved_;
  }

  absl::StatusOr<Function*> Build() {
    if (source_.is_spmd()) {
      return Error(source_.loc(),
                   "only global functions are differentiated, @" + source_.name() + " is spmd");
    }
    const std::string name = source_.name() + "_grad";
    if (module_.FindFunction(name) != nullptr) {
      return Error(source_.loc(), absl::StrCat("@", name, " exists already"));
    }
    if (absl::Status s = PickArguments(); !s.ok()) return s;
    if (absl::Status s = CheckSeeds(); !s.ok()) return s;

    auto grad = std::make_unique<Function>(name, /*is_spmd=*/false, source_.loc());
    grad->set_mesh_name(source_.mesh_name(), source_.mesh_name_loc());
    grad->set_mesh(source_.mesh());
    grad_ = grad.get();
    for (int i = 0; i < source_.body()->num_arguments(); ++i) {
      Value* arg = source_.body()->argument(i);
      grad_->AddArgument(source_.arg_types()[i], arg->name(), arg->loc(),
                         source_.arg_type_locs()[i]);
    }
    for (Type t : source_.result_types()) grad_->AddResult(t);
    for (int r : seeded_results_) {
      if (!options_.seed_cotangents) break;
      Type t = source_.result_types()[r];
      grad_->AddArgument(t.WithElementType(CotangentType(t)), absl::StrCat("d_result", r));
    }
    for (int a : wrt_) {
      Type t = source_.arg_types()[a];
      grad_->AddResult(t.WithElementType(CotangentType(t)));
    }
    grad_->RefreshArgumentTypes();
    for (int i = 0; i < source_.body()->num_arguments(); ++i) {
      map_[source_.body()->argument(i)] = grad_->body()->argument(i);
    }
    OpBuilder b(grad_);
    if (absl::Status s = CloneForward(); !s.ok()) return s;
    if (absl::Status s = FindBlocks(); !s.ok()) return s;
    if (absl::Status s = Seed(b); !s.ok()) return s;
    if (absl::Status s = Backward(b); !s.ok()) return s;

    std::vector<Value*> results;
    for (Value* v : source_.body()->terminator()->operands()) results.push_back(map_.at(v));
    for (int a : wrt_) {
      Value* arg = source_.body()->argument(a);
      Value* ct = Cotangent(arg);
      if (ct == nullptr) ct = ops::Filled(b, 0, CotangentType(arg->type()), arg->type().dims());
      results.push_back(ct);
    }
    if (!b.ok()) return Error(source_.loc(), absl::StrCat("internal: ", b.status().message()));
    b.Return(results);
    // Rules emit every operand's cotangent; those of operands that carry no gradient
    // (and forward ops nothing returns) go here.
    EliminateDeadCode(*grad_);
    CollectSaved();
    return module_.InsertFunctionAfter(&source_, std::move(grad));
  }

 private:
  ElementType CotangentType(Type t) const {
    return ops::CotangentElementType(t, options_.grad_type);
  }

  absl::Status Error(Location loc, std::string message) {
    if (diagnostics_ != nullptr) diagnostics_->Error(loc, message);
    return absl::FailedPreconditionError(message);
  }

  absl::Status PickArguments() {
    const Block* body = source_.body();
    if (options_.wrt.empty()) {
      for (int i = 0; i < body->num_arguments(); ++i) {
        if (IsFloatTensor(body->argument(i)->type())) wrt_.push_back(i);
      }
      return absl::OkStatus();
    }
    for (const std::string& wanted : options_.wrt) {
      int found = -1;
      for (int i = 0; i < body->num_arguments(); ++i) {
        if (body->argument(i)->name() == wanted) found = i;
      }
      if (found < 0) {
        return Error(source_.loc(), absl::StrFormat("wrt names %%%s, which @%s has no argument of",
                                                    wanted, source_.name()));
      }
      Value* arg = body->argument(found);
      if (!IsFloatTensor(arg->type())) {
        return Error(arg->loc(), absl::StrFormat("cannot differentiate with respect to %%%s: %s is "
                                                 "not a float tensor",
                                                 wanted, arg->type().ToString()));
      }
      wrt_.push_back(found);
    }
    return absl::OkStatus();
  }

  absl::Status CheckSeeds() {
    const std::vector<Type>& results = source_.result_types();
    if (!options_.seed_cotangents) {
      if (results.empty() || !IsFloatTensor(results[0]) || results[0].rank() != 0) {
        return Error(
            source_.loc(),
            absl::StrFormat("@%s's first result must be a float scalar (the loss) to "
                            "differentiate it; got %s (seed=cotangents takes output "
                            "cotangents instead)",
                            source_.name(), results.empty() ? "no result" : results[0].ToString()));
      }
      seeded_results_.push_back(0);
      return absl::OkStatus();
    }
    for (int r = 0; r < static_cast<int>(results.size()); ++r) {
      if (IsFloatTensor(results[r])) seeded_results_.push_back(r);
    }
    if (seeded_results_.empty()) {
      return Error(source_.loc(), absl::StrFormat("@%s has no float result to take a cotangent of",
                                                  source_.name()));
    }
    return absl::OkStatus();
  }

  // Appends a copy of `op` to @f_grad, reading each operand's copy from `copies` if
  // there, else from the forward's (map_), and records its results in `copies`.
  Operation* AppendCopy(const Operation& op, AttrDict attrs,
                        absl::flat_hash_map<const Value*, Value*>& copies) {
    std::optional<Type> lse = LseToAdd(op);
    CloneOpOptions options;
    options.attrs = &attrs;
    if (lse) options.extra_result_types = {&*lse, 1};
    options.fallback = &map_;
    return CloneOp(op, *grad_->body(), nullptr, copies, options);
  }

  // Copies @f's ops (not its return) into @f_grad, after finding which of them the
  // backward differentiates (Analyze).
  absl::Status CloneForward() {
    for (Operation* op : *source_.body()) {
      if (op->def().Has(kTerminator)) break;
      if (op->num_regions() > 0) {
        return Error(op->loc(),
                     absl::StrFormat("'%s' with a body is not differentiated", op->name()));
      }
      forward_.push_back(op);
    }
    Analyze();
    for (const Operation* op : forward_) {
      const Operation* copy = AppendCopy(*op, op->attrs(), map_);
      forward_copies_.insert(copy);
      // An added log-sum-exp is filed under the op's first result (BackwardRead).
      for (int r = op->num_results(); r < copy->num_results(); ++r) {
        extra_results_[copy->result(r)] = op->result(0);
      }
    }
    return absl::OkStatus();
  }

  // Fills saved_ from @f_grad as dead code elimination left it: every read of a forward
  // value's stand-in by an op that is not a forward copy. Only live ops are looked at
  // (forward_copies_ may name erased ones, which no live op equals).
  void CollectSaved() {
    absl::flat_hash_map<const Value*, const Value*> forward_of;
    for (const auto& [forward, copy] : map_) forward_of[copy] = forward;
    for (const auto& [copy, forward] : extra_results_) forward_of[copy] = forward;
    const Operation* ret = grad_->body()->terminator();
    const int forward_results = static_cast<int>(source_.result_types().size());
    for (Operation* op : *grad_->body()) {
      if (forward_copies_.contains(op)) continue;
      for (int i = 0; i < op->num_operands(); ++i) {
        if (op == ret && i < forward_results) continue;  // @f's own result, not a gradient
        Value* v = op->operand(i);
        auto it = forward_of.find(v);
        if (it == forward_of.end()) continue;
        std::vector<BackwardRead>& reads = saved_[it->second];
        // An op reading a value twice (mul(%x, %x)) reads it once here.
        if (!reads.empty() && reads.back().user == op && reads.back().value == v) continue;
        reads.push_back({v, op});
      }
    }
  }

  // A differentiated attention that returns no lse is copied returning its lse too
  // (this is its type): attention_grad reads it, and otherwise attention's rule would run
  // the forward a second time just to get it.
  std::optional<Type> LseToAdd(const Operation& op) const {
    if (op.def().kind != OpKind::kAttention || op.num_results() != 1 ||
        !active_ops_.contains(&op) || !needed_.contains(op.result(0))) {
      return std::nullopt;
    }
    std::vector<Type> operand_types;
    for (Value* v : op.operands()) operand_types.push_back(v->type());
    OpSignature sig{operand_types, op.attrs(), {}, /*num_results=*/2, grad_->mesh(), false};
    absl::StatusOr<std::vector<Type>> types = InferResultTypes(op.def(), sig);
    // Should inference refuse, the rule recomputes the lse itself.
    if (!types.ok() || types->size() != 2) return std::nullopt;
    return (*types)[1];
  }

  absl::Status FindBlocks() {
    if (!options_.remat_at.empty()) {
      if (options_.remat != RematPolicy::kNone) {
        return Error(source_.loc(), "give remat=blocks or remat-at, not both");
      }
      absl::StatusOr<RematBlocks> blocks = FindCheckpointBlocks(source_, options_.remat_at);
      if (!blocks.ok()) return Error(source_.loc(), std::string(blocks.status().message()));
      remat_ = *std::move(blocks);
    } else if (options_.remat == RematPolicy::kBlocks) {
      remat_ = FindResidualBlocks(source_);
    }
    recomputed_.resize(remat_.blocks.size());
    return absl::OkStatus();
  }

  // The copy of forward op `op` whose operands and results its derivative rule reads:
  // the forward's, or, for an op of a remat block, its recomputation, emitted here (at
  // the block's first backward op) when the block has none yet.
  const Operation& RuleCopy(const Operation& op) {
    auto owner = remat_.owner.find(&op);
    if (owner == remat_.owner.end()) return *map_.at(op.result(0))->defining_op();
    absl::flat_hash_map<const Value*, Value*>& copies = recomputed_[owner->second];
    if (copies.empty()) {
      for (const Operation* inside : remat_.blocks[owner->second]) {
        AttrDict attrs = inside->attrs();
        attrs.Set(kRematAttr, Attribute::Int(owner->second));
        AppendCopy(*inside, std::move(attrs), copies);
      }
    }
    return *copies.at(op.result(0))->defining_op();
  }

  // Active: depends on a differentiated argument through float values. Needed: leads
  // to a seeded result (through any value, so integer detours are caught).
  void Analyze() {
    for (int a : wrt_) active_.insert(source_.body()->argument(a));
    for (const Operation* op : forward_) {
      bool any = false;
      for (Value* v : op->operands()) any |= active_.contains(v);
      if (!any) continue;
      for (Value* r : op->results()) {
        if (IsFloatTensor(r->type())) active_.insert(r);
      }
      active_ops_.insert(op);
    }
    const Operation* ret = source_.body()->terminator();
    for (int r : seeded_results_) needed_.insert(ret->operand(r));
    for (auto it = forward_.rbegin(); it != forward_.rend(); ++it) {
      bool any = false;
      for (Value* r : (*it)->results()) any |= needed_.contains(r);
      if (!any) continue;
      for (Value* v : (*it)->operands()) needed_.insert(v);
    }
  }

  absl::Status Seed(OpBuilder& b) {
    const Operation* ret = source_.body()->terminator();
    for (size_t i = 0; i < seeded_results_.size(); ++i) {
      Value* v = ret->operand(seeded_results_[i]);
      if (!active_.contains(v)) continue;
      Value* seed =
          options_.seed_cotangents
              ? grad_->body()->argument(source_.body()->num_arguments() + static_cast<int>(i))
              : ops::Filled(b, 1, CotangentType(v->type()), {});
      Accumulate(b, v, seed);
    }
    return b.ok() ? absl::OkStatus()
                  : Error(source_.loc(), absl::StrCat("internal: ", b.status().message()));
  }

  Value* Cotangent(const Value* v) const {
    auto it = cotangents_.find(v);
    return it == cotangents_.end() ? nullptr : it->second;
  }

  void Accumulate(OpBuilder& b, const Value* v, Value* ct) {
    Value*& slot = cotangents_[v];
    slot = slot == nullptr ? ct : b.Op(OpKind::kAdd, {slot, ct});
  }

  // The slices that tile an active value (slice_tiling.h), each by the value it reads.
  void FindTilings() {
    absl::flat_hash_set<const Value*> seen;
    for (const Operation* op : forward_) {
      if (!op->Is(OpKind::kSlice) || !active_ops_.contains(op)) continue;
      const Value* v = op->operand(0);
      if (!seen.insert(v).second || !active_.contains(v) || !needed_.contains(v)) continue;
      std::optional<SliceTiling> tiling = TilingSlices(*v);
      if (!tiling.has_value()) continue;
      for (const Operation* slice : tiling->slices) tiled_by_[slice] = v;
      const size_t n = tiling->slices.size();
      tilings_[v] = {*std::move(tiling), std::vector<Value*>(n, nullptr), 0};
    }
  }

  // One slice of a tiling reached backwards: its cotangent is kept until the last of the
  // tiling's slices, which joins them all (zeros for a block with none) into the value's
  // cotangent with one concat.
  void JoinTiledSlice(OpBuilder& b, const Operation& slice, const Value* v, Value* ct) {
    PendingTiling& t = tilings_.at(v);
    const size_t i = static_cast<size_t>(
        std::find(t.tiling.slices.begin(), t.tiling.slices.end(), &slice) -
        t.tiling.slices.begin());
    t.cotangents[i] = ct;
    if (++t.reached < t.tiling.slices.size()) return;
    if (std::all_of(t.cotangents.begin(), t.cotangents.end(),
                    [](const Value* c) { return c == nullptr; })) {
      return;
    }
    const ElementType et = CotangentType(v->type());
    std::vector<OpBuilder::Operand> parts;
    for (size_t j = 0; j < t.cotangents.size(); ++j) {
      const Value* block = t.tiling.slices[j]->result(0);
      parts.push_back(t.cotangents[j] != nullptr
                          ? b.Convert(t.cotangents[j], et)
                          : ops::Filled(b, 0, et, block->type().dims()));
    }
    AttrDict attrs;
    attrs.Set("dim", Attribute::Int(t.tiling.dim));
    Accumulate(b, v, b.Op(OpKind::kConcat, std::move(parts), std::move(attrs)));
  }

  absl::Status Backward(OpBuilder& b) {
    FindTilings();
    for (auto it = forward_.rbegin(); it != forward_.rend(); ++it) {
      const Operation& op = **it;
      if (!active_ops_.contains(&op)) continue;
      if (auto tiled = tiled_by_.find(&op); tiled != tiled_by_.end()) {
        Value* r = op.result(0);
        const bool has_ct = active_.contains(r) && needed_.contains(r);
        b.set_loc(op.loc());
        JoinTiledSlice(b, op, tiled->second, has_ct ? Cotangent(r) : nullptr);
        if (!b.ok()) {
          return Error(op.loc(), absl::StrFormat("internal: '%s': %s", op.name(),
                                                 b.status().message()));
        }
        continue;
      }
      std::vector<Value*> result_cts;
      bool any = false;
      for (Value* r : op.results()) {
        Value* ct = active_.contains(r) && needed_.contains(r) ? Cotangent(r) : nullptr;
        result_cts.push_back(ct);
        any |= ct != nullptr;
      }
      if (!any) {
        // An integer result computed from a differentiated value and leading to the
        // loss: the gradient would have to pass through it.
        for (Value* r : op.results()) {
          if (needed_.contains(r) && !IsFloatTensor(r->type()) && !r->type().is_index() &&
              r->type().element_type() != ElementType::kI1) {
            return Error(op.loc(), absl::StrFormat("the gradient cannot flow through '%s', whose "
                                                   "result %s is an integer",
                                                   op.name(), r->type().ToString()));
          }
        }
        continue;
      }
      if (op.def().vjp == nullptr) {
        return Error(op.loc(), absl::StrFormat("'%s' is not differentiable", op.name()));
      }
      // The rule reads the forward op of @f_grad (its operands and results there).
      const Operation& copy = RuleCopy(op);
      b.set_loc(op.loc());
      VjpArgs args{copy, result_cts, options_.grad_type};
      absl::StatusOr<std::vector<Value*>> operand_cts = op.def().vjp(b, args);
      if (!operand_cts.ok()) {
        return Error(op.loc(),
                     absl::StrFormat("'%s': %s", op.name(), operand_cts.status().message()));
      }
      for (int i = 0; i < op.num_operands(); ++i) {
        Value* v = op.operand(i);
        Value* ct = i < static_cast<int>(operand_cts->size()) ? (*operand_cts)[i] : nullptr;
        if (ct == nullptr || !active_.contains(v) || !needed_.contains(v)) continue;
        ct = b.Convert(ct, CotangentType(v->type()));
        if (ct != nullptr && ct->type().dims() != v->type().dims()) {
          return Error(op.loc(),
                       absl::StrFormat("internal: the rule of '%s' gave operand %d a "
                                       "cotangent %s for %s",
                                       op.name(), i, ct->type().ToString(), v->type().ToString()));
        }
        Accumulate(b, v, ct);
      }
      if (!b.ok()) {
        return Error(op.loc(),
                     absl::StrFormat("internal: '%s': %s", op.name(), b.status().message()));
      }
    }
    return absl::OkStatus();
  }

  Module& module_;
  const Function& source_;
  const AutodiffOptions& options_;
  DiagnosticEngine* diagnostics_;
  Function* grad_ = nullptr;
  std::vector<int> wrt_;
  std::vector<int> seeded_results_;
  std::vector<const Operation*> forward_;
  absl::flat_hash_map<const Value*, Value*> map_;
  absl::flat_hash_set<const Value*> active_;
  absl::flat_hash_set<const Operation*> active_ops_;
  absl::flat_hash_set<const Value*> needed_;
  absl::flat_hash_map<const Value*, Value*> cotangents_;
  struct PendingTiling {
    SliceTiling tiling;
    std::vector<Value*> cotangents;  // per slice, once reached
    size_t reached = 0;
  };
  absl::flat_hash_map<const Operation*, const Value*> tiled_by_;
  absl::flat_hash_map<const Value*, PendingTiling> tilings_;
  absl::flat_hash_set<const Operation*> forward_copies_;
  absl::flat_hash_map<const Value*, const Value*> extra_results_;
  absl::flat_hash_map<const Value*, std::vector<BackwardRead>> saved_;
  RematBlocks remat_;
  // Per remat block, its recomputed values by the forward value they recompute (empty
  // until the block's backward starts).
  std::vector<absl::flat_hash_map<const Value*, Value*>> recomputed_;
};

}  // namespace

absl::StatusOr<Function*> Differentiate(Module& module, const Function& function,
                                        const AutodiffOptions& options,
                                        DiagnosticEngine* diagnostics) {
  return GradientBuilder(module, function, options, diagnostics).Build();
}

absl::StatusOr<Gradient> DifferentiateWithSaved(Module& module, const Function& function,
                                                const AutodiffOptions& options,
                                                DiagnosticEngine* diagnostics) {
  GradientBuilder builder(module, function, options, diagnostics);
  absl::StatusOr<Function*> built = builder.Build();
  if (!built.ok()) return built.status();
  return Gradient{*built, builder.saved()};
}

std::vector<std::pair<std::string, GradTypeOption>> GradTypeSpellings() {
  return {{"same", GradTypeOption::kSame}, {"f32", GradTypeOption::kF32},
          {"f64", GradTypeOption::kF64}};
}

std::optional<ElementType> GradElementType(GradTypeOption option) {
  switch (option) {
    case GradTypeOption::kSame: return std::nullopt;
    case GradTypeOption::kF32: return ElementType::kF32;
    case GradTypeOption::kF64: return ElementType::kF64;
  }
  return std::nullopt;
}

const OptionSchema<AutodiffPassOptions>& AutodiffPassOptions::Schema() {
  using O = AutodiffPassOptions;
  static const auto* schema =
      &(*new OptionSchema<O>())
           .String("func", &O::func,
                   "The function to differentiate, e.g. @mlp (empty: every global function)")
           .String("wrt", &O::wrt,
                   "Arguments to differentiate with respect to, e.g. \"w1,w2\" (empty: every "
                   "float argument)")
           .Enum("seed", &O::seed, {{"loss", O::Seed::kLoss}, {"cotangents", O::Seed::kCotangents}},
                 "loss: the gradient of the first result, a float scalar; cotangents: a VJP "
                 "taking one cotangent argument per float result")
           .Enum("grad-type", &O::grad_type, GradTypeSpellings(),
                 "Element type of every gradient: same (each value's own) or f32/f64 (e.g. bf16 "
                 "forward, f32 gradients)")
           .Enum("remat", &O::remat, {{"none", RematPolicy::kNone}, {"blocks", RematPolicy::kBlocks}},
                 "Activation recomputation: none (keep every forward value the backward reads) "
                 "or blocks (the backward recomputes each pre-norm residual block's inside)")
           .String("remat-at", &O::remat_at,
                   "Checkpoint values instead of remat=blocks, e.g. \"%r1,%y\": the backward "
                   "recomputes what lies between them");
  return *schema;
}

const PassInfo& AutodiffPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<AutodiffPass>(
      "autodiff",
      "Add @f_grad to each global function @f: its results and the gradients of its first "
      "(scalar) result, or a vector-Jacobian product"));
  return *info;
}

absl::Status AutodiffPass::Run(Module& module) {
  AutodiffOptions ad;
  absl::StatusOr<std::vector<std::string>> wrt = ValueNameList(options().wrt, "autodiff", "wrt");
  if (!wrt.ok()) return wrt.status();
  ad.wrt = *std::move(wrt);
  ad.seed_cotangents = options().seed == AutodiffPassOptions::Seed::kCotangents;
  ad.grad_type = GradElementType(options().grad_type);
  ad.remat = options().remat;
  absl::StatusOr<std::vector<std::string>> remat_at =
      ValueNameList(options().remat_at, "autodiff", "remat-at");
  if (!remat_at.ok()) return remat_at.status();
  ad.remat_at = *std::move(remat_at);

  absl::StatusOr<std::vector<Function*>> picked = PickFunctions(module, options().func, "autodiff");
  if (!picked.ok()) return picked.status();
  for (Function* f : *picked) {
    if (ad.remat == RematPolicy::kBlocks && ad.remat_at.empty()) {
      const int64_t blocks = static_cast<int64_t>(FindResidualBlocks(*f).blocks.size());
      AddToStatistic("remat-blocks", "Residual blocks recomputed in the backward", blocks);
      if (blocks == 0) {
        // Said, not failed: the gradient is right, it only keeps what it would keep anyway.
        Remark(absl::StrFormat("remat=blocks found no pre-norm residual block in @%s (a value "
                               "feeding a norm and a residual add of that norm's branch): "
                               "nothing is recomputed",
                               f->name()),
               f->loc());
      }
    }
    absl::StatusOr<Function*> grad = Differentiate(module, *f, ad, &diagnostics());
    if (!grad.ok()) return grad.status();
  }
  AddToStatistic("functions", "Gradient functions added", static_cast<int64_t>(picked->size()));
  return absl::OkStatus();
}

}  // namespace commir
