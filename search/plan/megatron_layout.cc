#include "search/plan/megatron_layout.h"

#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/attribute.h"
#include "commir/element_type.h"
#include "commir/op_def.h"
#include "commir/printer.h"
#include "parser/parser.h"

namespace commir::search::plan {
namespace {

using Axes = std::vector<std::string>;

// A value's laid-out type: its (possibly padded) dims and the axes splitting each.
struct Layout {
  std::vector<int64_t> dims;
  std::vector<Axes> axes;
};

// What a value is, for the rules: the residual stream, a norm output (gathered), a
// column-parallel output or its views (its columns over tp, or whole where tp does not
// divide its heads), or something else.
enum class Role { kResidual, kGathered, kColumns, kOther };

class LayoutWriter {
 public:
  LayoutWriter(const Function& f, const MegatronLayoutOptions& o) : f_(f), o_(o) {
    if (o.layout.cp > 1) cp_ = {"cp"};
    if (o.layout.tp > 1) tp_ = {"tp"};
    residual_ = cp_;
    if (o.layout.sequence_parallel) residual_.insert(residual_.end(), tp_.begin(), tp_.end());
  }

  absl::StatusOr<std::string> Write() {
    if (f_.is_spmd()) return Error(f_.loc(), "a spmd function is laid out already");
    if (f_.arg_types().empty() || f_.arg_types()[0].rank() != 3) {
      return Error(f_.loc(), "the first argument is not the residual stream [batch, seq, hidden]");
    }
    if (f_.arg_types()[0].dims()[0] != o_.layout.micro_batch) {
      return Error(f_.loc(), absl::StrCat("written for micro-batch ", f_.arg_types()[0].dims()[0],
                                          ", not ", o_.layout.micro_batch));
    }
    Block* body = f_.body();
    Value* x = body->argument(0);
    if (absl::Status s = Set(x, Role::kResidual, SeqSplit(x->type(), residual_)); !s.ok()) return s;
    std::string text;
    for (Operation* op = body->front(); op != nullptr; op = op->next()) {
      absl::StatusOr<std::string> line = Op(*op);
      if (!line.ok()) return line.status();
      absl::StrAppend(&text, *line);
    }
    // The signature, now that every argument's use has said how it is split.
    std::vector<std::string> args;
    for (int i = 0; i < body->num_arguments(); ++i) {
      Value* a = body->argument(i);
      if (!layouts_.contains(a)) Set(a, Role::kOther, Whole(a->type())).IgnoreError();
      args.push_back(absl::StrCat("%", a->name(), ": ", TypeText(a)));
    }
    std::vector<std::string> mesh_axes;
    if (o_.layout.cp > 1) mesh_axes.push_back(absl::StrCat("cp=", o_.layout.cp));
    if (o_.layout.tp > 1) mesh_axes.push_back(absl::StrCat("tp=", o_.layout.tp));
    const std::string mesh =
        mesh_axes.empty() ? "" : absl::StrCat("mesh @m(", absl::StrJoin(mesh_axes, ", "), ")\n\n");
    return absl::StrCat(mesh, "func @", o_.name.empty() ? f_.name() : o_.name, "(",
                        absl::StrJoin(args, ", "), ") -> ", result_type_, " {\n", text, "}\n");
  }

 private:
  absl::Status Error(Location loc, absl::string_view message) const {
    return absl::InvalidArgumentError(absl::StrCat(o_.file, ":", loc.line, ":", loc.col, ": @",
                                                   f_.name(), ": the Megatron layout: ", message));
  }

  static Layout Whole(Type t) { return {t.dims(), std::vector<Axes>(t.dims().size())}; }

  Layout SeqSplit(Type t, const Axes& seq) const {
    Layout l = Whole(t);
    if (l.dims.size() >= 2) l.axes[1] = seq;
    return l;
  }

  int64_t GroupSize(const Axes& axes) const {
    int64_t n = 1;
    for (const std::string& a : axes) n *= a == "tp" ? o_.layout.tp : o_.layout.cp;
    return n;
  }

  absl::Status Set(const Value* v, Role role, Layout l) {
    for (size_t d = 0; d < l.dims.size(); ++d) {
      if (l.dims[d] % GroupSize(l.axes[d]) != 0) {
        return Error(v->loc(),
                     absl::StrCat("%", v->name(), "'s dimension ", d, " (", l.dims[d],
                                  ") does not split over ", GroupSize(l.axes[d]), " devices"));
      }
    }
    layouts_[v] = std::move(l);
    roles_[v] = role;
    return absl::OkStatus();
  }

  std::string TypeText(const Value* v) const {
    const Layout& l = layouts_.at(v);
    std::vector<std::string> dims;
    for (size_t d = 0; d < l.dims.size(); ++d) {
      const Axes& a = l.axes[d];
      if (a.empty()) {
        dims.push_back(absl::StrCat(l.dims[d]));
      } else if (a.size() == 1) {
        dims.push_back(absl::StrCat(l.dims[d], "@", a[0]));
      } else {
        dims.push_back(absl::StrCat(l.dims[d], "@(", absl::StrJoin(a, ","), ")"));
      }
    }
    return absl::StrCat(ElementTypeName(v->type().element_type()), "[", absl::StrJoin(dims, ", "),
                        "]");
  }

  Role RoleOf(const Value* v) const {
    auto it = roles_.find(v);
    return it == roles_.end() ? Role::kOther : it->second;
  }

  bool IsArgument(const Value* v) const { return v->defining_op() == nullptr && !v->is_literal(); }

  std::string OperandText(const Value* v) const {
    return v->is_literal() ? FormatFloat(v->literal_value()) : absl::StrCat("%", v->name());
  }

  // Whether the columns of a column-parallel output split over tp: not when it is
  // reshaped into heads that tp does not divide.
  bool ColumnsSplit(const Value* out) const {
    for (const Operation* user : out->users()) {
      if (user->Is(OpKind::kReshape) && user->result(0)->type().rank() == 4) {
        return user->result(0)->type().dims()[2] % o_.layout.tp == 0;
      }
    }
    return true;
  }

  // The columns of a column-parallel weight of the head's vocabulary are padded.
  int64_t Columns(int64_t n) const {
    if (o_.vocabulary <= 0 || n != o_.vocabulary) return n;
    return o_.padded_vocabulary > 0 ? o_.padded_vocabulary : PaddedVocabulary(n, o_.layout.tp);
  }

  absl::StatusOr<std::string> Op(const Operation& op) {
    const std::string name(op.def().name);
    if (op.Is(OpKind::kReturn)) {
      if (op.num_operands() != 1 || !layouts_.contains(op.operand(0))) {
        return Error(op.loc(), "the function must return one computed value");
      }
      result_type_ = TypeText(op.operand(0));
      return absl::StrCat("  return ", OperandText(op.operand(0)), "\n");
    }
    if (op.num_results() != 1 || op.num_regions() != 0) {
      return Error(op.loc(), absl::StrCat("no Megatron layout rule for `", name, "`"));
    }
    const Value* out = op.result(0);
    const bool first_laid_out = op.num_operands() > 0 && layouts_.contains(op.operand(0));
    if (!first_laid_out && (op.Is(OpKind::kReshape) || op.Is(OpKind::kTranspose) ||
                            op.Is(OpKind::kAttention) || op.Is(OpKind::kSoftmax))) {
      return Error(op.loc(),
                   absl::StrCat("`", name, "` of a value no rule has laid out (a weight?)"));
    }
    std::vector<std::string> operands;
    for (const Value* v : op.operands()) operands.push_back(OperandText(v));
    bool typed = true;  // written with its result type
    absl::Status set;
    if (op.Is(OpKind::kLayerNorm) || op.Is(OpKind::kRmsNorm)) {
      if (RoleOf(op.operand(0)) != Role::kResidual) {
        return Error(op.loc(), "a norm's input is not the residual stream (not a pre-norm layer)");
      }
      for (int i = 1; i < op.num_operands(); ++i) {
        if (IsArgument(op.operand(i)))
          set.Update(Set(op.operand(i), Role::kOther, Whole(op.operand(i)->type())));
      }
      set.Update(Set(out, Role::kGathered, SeqSplit(out->type(), cp_)));
    } else if (op.Is(OpKind::kMatmul)) {
      const Value* lhs = op.operand(0);
      const Value* w = op.operand(1);
      if (!IsArgument(w) || w->type().rank() != 2) {
        return Error(op.loc(), "a projection's weight is not a [in, out] argument");
      }
      const int64_t in = w->type().dims()[0], cols = Columns(w->type().dims()[1]);
      if (RoleOf(lhs) == Role::kGathered) {  // column-parallel
        const Axes split = ColumnsSplit(out) ? tp_ : Axes{};
        set.Update(Set(w, Role::kOther, {{in, cols}, {{}, split}}));
        Layout l = SeqSplit(out->type(), cp_);
        l.dims.back() = cols;
        l.axes.back() = split;
        set.Update(Set(out, Role::kColumns, std::move(l)));
      } else if (RoleOf(lhs) == Role::kColumns) {  // row-parallel
        set.Update(Set(w, Role::kOther, {{in, cols}, {tp_, {}}}));
        set.Update(Set(out, Role::kResidual, SeqSplit(out->type(), residual_)));
      } else {
        return Error(op.loc(),
                     "a matmul neither after a norm (column-parallel) nor of "
                     "tp-split columns (row-parallel)");
      }
    } else if (op.Is(OpKind::kReshape)) {
      const Layout& in = layouts_.at(op.operand(0));
      Layout l = Whole(out->type());
      if (l.dims.size() >= 2 && in.axes.size() >= 2) l.axes[1] = in.axes[1];
      if (l.dims.size() == 4 && in.dims.size() == 3) l.axes[2] = in.axes[2];  // columns to heads
      if (l.dims.size() == 3 && in.dims.size() == 4) l.axes[2] = in.axes[2];  // heads to columns
      set.Update(Set(out, RoleOf(op.operand(0)), std::move(l)));
    } else if (op.Is(OpKind::kTranspose)) {
      const Layout& in = layouts_.at(op.operand(0));
      const std::vector<int64_t> perm = op.RequiredIntListAttr("perm");
      Layout l = Whole(out->type());
      for (size_t d = 0; d < perm.size() && d < l.axes.size(); ++d) l.axes[d] = in.axes[perm[d]];
      set.Update(Set(out, RoleOf(op.operand(0)), std::move(l)));
      typed = false;
    } else if (op.Is(OpKind::kAttention)) {
      Layout l = layouts_.at(op.operand(0));
      set.Update(Set(out, RoleOf(op.operand(0)), std::move(l)));
      typed = false;
    } else if (op.Is(OpKind::kSoftmax)) {
      set.Update(Set(out, RoleOf(op.operand(0)), layouts_.at(op.operand(0))));
    } else if (op.def().traits & kElementwise) {
      // The first computed operand's layout (the residual add keeps the residual's).
      const Value* from = nullptr;
      for (const Value* v : op.operands()) {
        if (!v->is_literal() && layouts_.contains(v)) from = from == nullptr ? v : from;
      }
      if (from == nullptr || out->type().dims() != from->type().dims()) {
        return Error(op.loc(), absl::StrCat("`", name, "` is not elementwise on a laid-out value"));
      }
      set.Update(Set(out, RoleOf(from), layouts_.at(from)));
      typed = false;
    } else {
      return Error(op.loc(), absl::StrCat("no Megatron layout rule for `", name, "`"));
    }
    if (!set.ok()) return set;
    std::string line =
        absl::StrCat("  %", out->name(), " = ", name, "(", absl::StrJoin(operands, ", "), ")");
    std::vector<std::string> attrs =
        AttributeEntries(op, false, [](const Value* v) { return v->name(); });
    if (!attrs.empty()) absl::StrAppend(&line, " {", absl::StrJoin(attrs, ", "), "}");
    if (typed) absl::StrAppend(&line, " : ", TypeText(out));
    return absl::StrCat(line, "\n");
  }

  const Function& f_;
  const MegatronLayoutOptions& o_;
  Axes cp_, tp_, residual_;
  absl::flat_hash_map<const Value*, Layout> layouts_;
  absl::flat_hash_map<const Value*, Role> roles_;
  std::string result_type_;
};

}  // namespace

absl::StatusOr<std::string> MegatronLayout(const Function& function,
                                           const MegatronLayoutOptions& options) {
  if (options.layout.tp < 1 || options.layout.cp < 1) {
    return absl::InvalidArgumentError("tp and cp must be at least 1");
  }
  return LayoutWriter(function, options).Write();
}

absl::StatusOr<std::string> MegatronLayoutText(const std::string& function_text,
                                               const MegatronLayoutOptions& options) {
  absl::StatusOr<std::unique_ptr<Module>> module =
      ParseModuleOrError(function_text, options.file);
  if (!module.ok()) return module.status();
  const std::vector<Function*> functions = (*module)->functions();
  if (functions.size() != 1) {
    return absl::InvalidArgumentError("the Megatron layout takes a module of one function");
  }
  return MegatronLayout(*functions[0], options);
}

}  // namespace commir::search::plan
