#include "transforms/sharding/megatron_layout.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "commir/call_graph.h"
#include "commir/element_type.h"
#include "commir/op_def.h"

namespace commir::sharding {
namespace {

// What a value is, for the rules: the residual stream, a norm output (gathered), a
// column-parallel output or its views (its columns over tp, or whole where tp does not
// divide its heads), or something else.
// The token ids (an embedding's first argument) and the loss (a cross_entropy's results
// and what is computed from them alone) have roles of their own.
enum class Role { kResidual, kGathered, kColumns, kIds, kLoss, kOther };

// Each laid-out function's returned value's role, for the calls of it.
using ReturnRoles = absl::flat_hash_map<const Function*, Role>;

class LayoutSetter {
 public:
  LayoutSetter(Function& f, const Mesh* mesh, const MegatronLayoutOptions& o,
               const FunctionsByName* functions, ReturnRoles* return_roles)
      : f_(f), mesh_(mesh), o_(o), functions_(functions), return_roles_(return_roles) {
    if (o.cp > 1) cp_ = {kMegatronCpAxis};
    if (o.tp > 1) tp_ = {kMegatronTpAxis};
    residual_ = cp_;
    if (o.sequence_parallel) residual_.insert(residual_.end(), tp_.begin(), tp_.end());
  }

  absl::Status Run() {
    if (f_.is_spmd()) return Error(f_.loc(), "a spmd function is laid out already");
    if (f_.mesh() != nullptr || !f_.mesh_name().empty()) {
      return Error(f_.loc(), "the function is on a mesh already (the layout makes its own)");
    }
    Block* body = f_.body();
    for (int i = 0; i < body->num_arguments(); ++i) {
      if (f_.arg_types()[i].is_tensor() && f_.arg_types()[i].has_sharding()) {
        return Error(body->argument(i)->loc(),
                     absl::StrCat("%", body->argument(i)->name(), " is laid out already"));
      }
    }
    const bool ids = IsTokenIds(f_.arg_types().empty() ? Type() : f_.arg_types()[0]);
    if (!ids && (f_.arg_types().empty() || !f_.arg_types()[0].is_tensor() ||
                 f_.arg_types()[0].rank() != 3)) {
      return Error(f_.loc(),
                   "the first argument is not the residual stream [batch, seq, hidden] or the "
                   "token ids [batch, seq]");
    }
    f_.set_mesh(mesh_);
    if (mesh_ != nullptr) f_.set_mesh_name(mesh_->name());
    Value* x = body->argument(0);
    // Token ids: each cp rank reads its part of the sequence; every tp rank all of it.
    if (absl::Status s = ids ? SetArgument(x, Role::kIds, SeqSplit(x->type(), cp_))
                             : SetArgument(x, Role::kResidual, SeqSplit(x->type(), residual_));
        !s.ok()) {
      return s;
    }
    for (Operation* op = body->front(); op != nullptr; op = op->next()) {
      if (absl::Status s = Op(*op); !s.ok()) return s;
    }
    f_.RefreshArgumentTypes();
    return absl::OkStatus();
  }

  Location error_loc() const { return error_loc_; }

 private:
  absl::Status Error(Location loc, absl::string_view message) {
    error_loc_ = loc;
    return absl::InvalidArgumentError(message);
  }

  // The type `t` with each dimension split over `axes` (dims unchanged).
  static Type Split(Type t, std::vector<AxisList> axes) {
    return Type::Tensor(t.element_type(), t.dims(), std::move(axes));
  }
  static Type Whole(Type t) { return t.WithoutSharding(); }

  // Token ids or labels: an integer [batch, seq] tensor.
  static bool IsTokenIds(Type t) {
    return !t.is_null() && t.is_tensor() && t.rank() == 2 && !IsFloatType(t.element_type());
  }

  Type SeqSplit(Type t, const AxisList& seq) const {
    std::vector<AxisList> axes(t.dims().size());
    if (axes.size() >= 2) axes[1] = seq;
    return Split(t, std::move(axes));
  }

  int64_t GroupSize(const AxisList& axes) const {
    int64_t n = 1;
    for (const std::string& a : axes) n *= a == kMegatronTpAxis ? o_.tp : o_.cp;
    return n;
  }

  // Every split dimension of `t`, written for `v`, is divisible by its group.
  absl::Status CheckSplits(const Value* v, Type t) {
    for (size_t d = 0; d < t.dims().size(); ++d) {
      const int64_t n = GroupSize(t.dim_axes()[d]);
      if (t.dims()[d] % n != 0) {
        return Error(v->loc(), absl::StrCat("%", v->name(), "'s dimension ", d, " (", t.dims()[d],
                                            ") does not split over ", n, " devices"));
      }
    }
    return absl::OkStatus();
  }

  // An argument's layout, the first rule to lay it out deciding; a second, different one
  // (a weight shared by two projections of other kinds) is an error.
  absl::Status SetArgument(Value* a, Role role, Type t) {
    if (absl::Status s = CheckSplits(a, t); !s.ok()) return s;
    if (auto it = roles_.find(a); it != roles_.end() && a->type() != t) {
      return Error(a->loc(), absl::StrCat("%", a->name(), " is used as ", a->type().ToString(),
                                          " and as ", t.ToString()));
    }
    a->set_type(t);
    f_.SetArgType(a->index(), t);
    roles_[a] = role;
    axes_[a] = t.dim_axes();
    return absl::OkStatus();
  }

  // `op`'s result: `written` as its written type (null: inferred from the operands), as
  // the parser would type the op written so. `axes` (for an inferred type): the split the
  // rules follow through it, which the inference may not keep (a transpose's result is
  // free for propagation, but a reshape back to columns after it keeps the heads' split).
  absl::Status SetResult(Operation& op, Role role, Type written,
                         std::vector<AxisList> axes = {}) {
    Value* out = op.result(0);
    if (!written.is_null()) {
      if (absl::Status s = CheckSplits(out, written); !s.ok()) return s;
    }
    std::vector<Type> operand_types;
    for (const Value* v : op.operands()) operand_types.push_back(v->type());
    std::vector<Type> annotated;
    if (!written.is_null()) annotated.push_back(written);
    const OpSignature sig{operand_types, op.attrs(), annotated, 1, mesh_, false};
    absl::StatusOr<std::vector<Type>> types = InferResultTypes(op.def(), sig);
    if (!types.ok()) return Error(op.loc(), types.status().message());
    if (absl::Status s = ValidateLayout((*types)[0], mesh_); !s.ok()) {
      return Error(op.loc(), absl::StrCat("%", out->name(), ": ", s.message()));
    }
    out->set_type((*types)[0]);
    roles_[out] = role;
    axes_[out] = written.is_null() ? std::move(axes) : written.dim_axes();
    return absl::OkStatus();
  }

  Role RoleOf(const Value* v) const {
    auto it = roles_.find(v);
    return it == roles_.end() ? Role::kOther : it->second;
  }
  bool LaidOut(const Value* v) const { return roles_.contains(v); }
  bool IsArgument(const Value* v) const { return v->kind() == Value::Kind::kBlockArgument; }

  // Whether the columns of a column-parallel output split over tp: not when it is
  // reshaped into heads that tp does not divide.
  bool ColumnsSplit(const Value* out) const {
    for (const Operation* user : out->users()) {
      if (user->Is(OpKind::kReshape) && user->result(0)->type().rank() == 4) {
        return user->result(0)->type().dims()[2] % o_.tp == 0;
      }
    }
    return true;
  }

  // The columns of a column-parallel weight of the head's vocabulary are padded.
  int64_t Columns(int64_t n) const {
    return o_.vocabulary > 0 && n == o_.vocabulary && o_.padded_vocabulary > 0
               ? o_.padded_vocabulary
               : n;
  }

  absl::Status Return(const Operation& op) {
    if (op.num_operands() != 1 || !LaidOut(op.operand(0))) {
      return Error(op.loc(), "the function must return one computed value");
    }
    f_.SetResultType(0, op.operand(0)->type());
    (*return_roles_)[&f_] = RoleOf(op.operand(0));
    return absl::OkStatus();
  }

  absl::Status Call(Operation& op) {
    const Function* callee = functions_ == nullptr ? nullptr : functions_->Callee(op);
    if (callee == nullptr || !return_roles_->contains(callee) || op.num_results() != 1 ||
        callee->arg_types().size() != static_cast<size_t>(op.num_operands())) {
      return Error(op.loc(), "a call of a function the layout did not lay out");
    }
    for (int i = 0; i < op.num_operands(); ++i) {
      Value* v = op.operand(i);
      const Type want = callee->arg_types()[i];
      if (IsArgument(v) && !LaidOut(v)) {
        if (absl::Status s = SetArgument(v, Role::kOther, want); !s.ok()) return s;
      } else if (v->type() != want) {
        return Error(op.loc(), absl::StrCat("passes %", v->name(), " as ", v->type().ToString(),
                                            " where @", callee->name(), " takes ",
                                            want.ToString()));
      }
    }
    op.result(0)->set_type(callee->result_types()[0]);
    roles_[op.result(0)] = return_roles_->at(callee);
    axes_[op.result(0)] = callee->result_types()[0].dim_axes();
    return absl::OkStatus();
  }

  // A batched matmul of two heads-first [b, heads, s, *] values inside the attention
  // (an unfused attention's scores q k^T and probabilities x v): each head's GEMM on the
  // rank holding the head, so the result keeps the operands' heads split over tp. Both
  // operands need the whole sequence (the scores pair every query with every key): the
  // sequence may not be split (cp).
  absl::Status HeadsMatmul(Operation& op) {
    const Value* a = op.operand(0);
    const Value* b = op.operand(1);
    if (!LaidOut(a) || !LaidOut(b) || RoleOf(a) != Role::kColumns ||
        RoleOf(b) != Role::kColumns || a->type().rank() != 4 || b->type().rank() != 4) {
      return Error(op.loc(),
                   "a matmul of two computed values that are not both heads-first "
                   "[b, heads, s, d] values of the attention");
    }
    const std::vector<AxisList>& in_a = axes_.at(a);
    const std::vector<AxisList>& in_b = axes_.at(b);
    if (in_a.size() != 4 || in_b.size() != 4 || in_a[1] != in_b[1]) {
      return Error(op.loc(), "the attention's batched matmul operands split their heads differently");
    }
    for (const std::vector<AxisList>* in : {&in_a, &in_b}) {
      if (!(*in)[0].empty() || !(*in)[2].empty() || !(*in)[3].empty()) {
        return Error(op.loc(),
                     "an attention written as batched matmuls needs the whole sequence on "
                     "each rank (no context parallelism)");
      }
    }
    const Value* out = op.result(0);
    std::vector<AxisList> axes(4);
    axes[1] = in_a[1];
    return SetResult(op, Role::kColumns,
                     Type::Tensor(out->type().element_type(), out->type().dims(), axes));
  }

  // An embedding's lookup: gather(table, ids) {axis = 0} of an argument table [vocabulary,
  // hidden] by the token ids, as Megatron-LM's VocabParallelEmbedding: the table's rows
  // (padded as the head's columns) over tp, the result in the residual stream's layout
  // (the partitioner sums each rank's partial rows into it).
  absl::Status Lookup(Operation& op) {
    Value* table = op.operand(0);
    const Value* ids = op.operand(1);
    if (op.num_operands() != 2 || !IsArgument(table) || table->type().rank() != 2 ||
        RoleOf(ids) != Role::kIds || op.IntAttr("axis") != 0) {
      return Error(op.loc(),
                   "a gather that is not an embedding's lookup (an argument table's rows, "
                   "axis 0, by the function's token ids)");
    }
    const Type t = table->type();
    if (absl::Status s = SetArgument(
            table, Role::kOther,
            Type::Tensor(t.element_type(), {Columns(t.dims()[0]), t.dims()[1]}, {tp_, {}}));
        !s.ok()) {
      return s;
    }
    return SetResult(op, Role::kResidual, SeqSplit(op.result(0)->type(), residual_));
  }

  // Learned positions: an argument [seq, hidden] broadcast over the batch, whole on every
  // rank (each slices its own rows), the result in the residual stream's layout.
  absl::Status Positions(Operation& op) {
    Value* positions = op.operand(0);
    if (absl::Status s = SetArgument(positions, Role::kOther, Whole(positions->type())); !s.ok()) {
      return s;
    }
    const Type out = op.result(0)->type();
    if (out.rank() != 3) return Error(op.loc(), "a broadcast that is not to the residual stream");
    return SetResult(op, Role::kResidual, SeqSplit(out, residual_));
  }

  // The loss: cross_entropy(logits, labels) of the head's logits (columns: the vocabulary,
  // split over tp) and argument labels [batch, seq] (the sequence over cp, as the ids);
  // its results and what is computed from them alone (a sum, a scale) are the loss.
  absl::Status Loss(Operation& op) {
    if (op.num_operands() != 2 || RoleOf(op.operand(0)) != Role::kColumns) {
      return Error(op.loc(), "a cross_entropy that is not of the head's logits");
    }
    Value* labels = op.operand(1);
    if (IsArgument(labels) && !LaidOut(labels)) {
      if (!IsTokenIds(labels->type())) {
        return Error(labels->loc(), absl::StrCat("%", labels->name(),
                                                 ": the labels are not an integer [batch, seq]"));
      }
      if (absl::Status s = SetArgument(labels, Role::kIds, SeqSplit(labels->type(), cp_)); !s.ok()) {
        return s;
      }
    }
    std::vector<Type> operand_types;
    for (const Value* v : op.operands()) operand_types.push_back(v->type());
    const OpSignature sig{operand_types, op.attrs(), {}, op.num_results(), mesh_, false};
    absl::StatusOr<std::vector<Type>> types = InferResultTypes(op.def(), sig);
    if (!types.ok()) return Error(op.loc(), types.status().message());
    for (int i = 0; i < op.num_results(); ++i) {
      op.result(i)->set_type((*types)[i]);
      roles_[op.result(i)] = Role::kLoss;
      axes_[op.result(i)] = (*types)[i].dim_axes();
    }
    return absl::OkStatus();
  }

  // A reshape's layout: one dimension split into two (the columns into heads, a group's
  // query columns into its heads) or two merged into one (back, or a group's heads into
  // the heads), every other dimension unchanged, keeps every split: a split dimension's
  // blocks are blocks of the outer (major) factor, so they stay whole blocks. The inner
  // factor of a merge may not be split. Merging the query groups into heads-first heads
  // [b, heads, s, d] when tp does not divide the groups (kept whole) splits the heads
  // there: each rank takes its query heads of the whole projection, as with separate
  // projections the key/value heads stay whole and the query heads split. Empty: not
  // such a reshape.
  std::optional<std::vector<AxisList>> ReshapeAxes(const Operation& op,
                                                   const std::vector<AxisList>& in) const {
    const std::vector<int64_t>& from = op.operand(0)->type().dims();
    const std::vector<int64_t>& to = op.result(0)->type().dims();
    if (in.size() != from.size()) return std::nullopt;
    if (from == to) return in;
    size_t i = 0;
    while (i < from.size() && i < to.size() && from[i] == to[i]) ++i;
    std::vector<AxisList> axes(to.size());
    const bool split = to.size() == from.size() + 1 && i < from.size() && i + 1 < to.size() &&
                       to[i] * to[i + 1] == from[i];
    const bool merge = from.size() == to.size() + 1 && i < to.size() && i + 1 < from.size() &&
                       from[i] * from[i + 1] == to[i];
    if (split) {
      for (size_t j = i + 2; j < to.size(); ++j) {
        if (to[j] != from[j - 1]) return std::nullopt;
        axes[j] = in[j - 1];
      }
      axes[i] = in[i];
      if (GroupSize(in[i]) > 1 && to[i] % GroupSize(in[i]) != 0) return std::nullopt;
    } else if (merge) {
      for (size_t j = i + 1; j < to.size(); ++j) {
        if (to[j] != from[j + 1]) return std::nullopt;
        axes[j] = in[j + 1];
      }
      if (!in[i + 1].empty()) return std::nullopt;
      axes[i] = in[i];
      const bool groups_into_heads = to.size() == 4 && i == 1 && RoleOf(op.operand(0)) == Role::kColumns;
      if (in[i].empty() && groups_into_heads && o_.tp > 1 && to[i] % o_.tp == 0) axes[i] = tp_;
    } else {
      return std::nullopt;
    }
    for (size_t j = 0; j < i; ++j) axes[j] = in[j];
    return axes;
  }

  // A static slice of a laid-out value (q, k and v out of the fused QKV projection's
  // groups) keeps its splits; it may cut only dimensions that are not split.
  absl::Status Slice(Operation& op, const std::vector<AxisList>& in) {
    const std::vector<int64_t> start = op.RequiredIntListAttr("start");
    const std::vector<int64_t> size = op.RequiredIntListAttr("size");
    const std::vector<int64_t>& dims = op.operand(0)->type().dims();
    if (in.size() != dims.size() || start.size() != dims.size() || size.size() != dims.size()) {
      return Error(op.loc(), "a slice of a value no rule has laid out");
    }
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!in[d].empty() && (start[d] != 0 || size[d] != dims[d])) {
        return Error(op.loc(), absl::StrCat("%", op.result(0)->name(), " cuts dimension ", d,
                                            ", which is split over ", GroupSize(in[d]),
                                            " devices"));
      }
    }
    return SetResult(op, RoleOf(op.operand(0)), Type(), in);
  }

  absl::Status Op(Operation& op) {
    const std::string name(op.def().name);
    if (op.Is(OpKind::kCrossEntropy)) return Loss(op);
    if (op.Is(OpKind::kReturn)) return Return(op);
    if (op.Is(OpKind::kCall)) return Call(op);
    if (op.num_results() != 1 || op.num_regions() != 0 || op.num_operands() == 0) {
      return Error(op.loc(), absl::StrCat("no Megatron layout rule for `", name, "`"));
    }
    const Value* out = op.result(0);
    const bool first_laid_out = op.num_operands() > 0 && LaidOut(op.operand(0));
    if (!first_laid_out && (op.Is(OpKind::kReshape) || op.Is(OpKind::kTranspose) ||
                            op.Is(OpKind::kSlice) ||
                            op.Is(OpKind::kAttention) || op.Is(OpKind::kSoftmax))) {
      return Error(op.loc(),
                   absl::StrCat("`", name, "` of a value no rule has laid out (a weight?)"));
    }
    if (op.Is(OpKind::kGather)) return Lookup(op);
    if (op.Is(OpKind::kBroadcast) && IsArgument(op.operand(0)) && !LaidOut(op.operand(0))) {
      return Positions(op);
    }
    if (RoleOf(op.operand(0)) == Role::kLoss && op.Is(OpKind::kReduceSum)) {
      return SetResult(op, Role::kLoss, Type(), {});
    }
    if (op.Is(OpKind::kLayerNorm) || op.Is(OpKind::kRmsNorm)) {
      if (RoleOf(op.operand(0)) != Role::kResidual) {
        return Error(op.loc(), "a norm's input is not the residual stream (not a pre-norm layer)");
      }
      for (int i = 1; i < op.num_operands(); ++i) {
        Value* v = op.operand(i);
        if (IsArgument(v) && !LaidOut(v)) {
          if (absl::Status s = SetArgument(v, Role::kOther, Whole(v->type())); !s.ok()) return s;
        }
      }
      return SetResult(op, Role::kGathered, SeqSplit(out->type(), cp_));
    }
    if (op.Is(OpKind::kMatmul) && !IsArgument(op.operand(1))) return HeadsMatmul(op);
    if (op.Is(OpKind::kMatmul)) {
      const Value* lhs = op.operand(0);
      Value* w = op.operand(1);
      if (!IsArgument(w) || w->type().rank() != 2) {
        return Error(op.loc(), "a projection's weight is not a [in, out] argument");
      }
      // A weight stored [out, in] (`transpose_b`: a head tied to the embedding's table).
      const bool transposed = op.BoolAttr("transpose_b");
      if (op.BoolAttr("transpose_a")) {
        return Error(op.loc(), "a projection of a transposed input (transpose_a)");
      }
      const int in_dim = transposed ? 1 : 0, out_dim = transposed ? 0 : 1;
      const int64_t in = w->type().dims()[in_dim], cols = Columns(w->type().dims()[out_dim]);
      const ElementType et = w->type().element_type();
      // The weight's type with its input dimension split `in_axes`, its output `out_axes`.
      auto weight = [&](AxisList in_axes, AxisList out_axes) {
        return transposed ? Type::Tensor(et, {cols, in}, {std::move(out_axes), std::move(in_axes)})
                          : Type::Tensor(et, {in, cols}, {std::move(in_axes), std::move(out_axes)});
      };
      if (RoleOf(lhs) == Role::kGathered) {  // column-parallel
        const AxisList split = ColumnsSplit(out) ? tp_ : AxisList{};
        if (absl::Status s = SetArgument(w, Role::kOther, weight({}, split)); !s.ok()) {
          return s;
        }
        std::vector<int64_t> dims = out->type().dims();
        dims.back() = cols;
        std::vector<AxisList> axes(dims.size());
        if (axes.size() >= 2) axes[1] = cp_;
        axes.back() = split;
        return SetResult(op, Role::kColumns, Type::Tensor(out->type().element_type(), dims, axes));
      }
      if (RoleOf(lhs) == Role::kColumns) {  // row-parallel
        if (absl::Status s = SetArgument(w, Role::kOther, weight(tp_, {})); !s.ok()) {
          return s;
        }
        return SetResult(op, Role::kResidual, SeqSplit(out->type(), residual_));
      }
      return Error(op.loc(),
                   "a matmul neither after a norm (column-parallel) nor of "
                   "tp-split columns (row-parallel)");
    }
    // The first operand's split, for the views below (laid out: checked above).
    static const std::vector<AxisList> kNone;
    const std::vector<AxisList>& in = first_laid_out ? axes_.at(op.operand(0)) : kNone;
    if (op.Is(OpKind::kReshape)) {
      std::optional<std::vector<AxisList>> axes = ReshapeAxes(op, in);
      if (!axes.has_value()) {
        // Any other reshape keeps the sequence's split where it is (dimension 1).
        axes.emplace(out->type().dims().size());
        if (axes->size() >= 2 && in.size() >= 2) (*axes)[1] = in[1];
      }
      return SetResult(op, RoleOf(op.operand(0)), Split(out->type(), *std::move(axes)));
    }
    if (op.Is(OpKind::kSlice)) return Slice(op, in);
    if (op.Is(OpKind::kSoftmax)) {
      return SetResult(op, RoleOf(op.operand(0)), Split(op.operand(0)->type(), in));
    }
    if (op.Is(OpKind::kTranspose)) {
      const std::vector<int64_t> perm = op.RequiredIntListAttr("perm");
      std::vector<AxisList> axes(out->type().dims().size());
      for (size_t d = 0; d < perm.size() && d < axes.size(); ++d) {
        if (perm[d] >= 0 && static_cast<size_t>(perm[d]) < in.size()) axes[d] = in[perm[d]];
      }
      return SetResult(op, RoleOf(op.operand(0)), Type(), std::move(axes));
    }
    if (op.Is(OpKind::kAttention)) return SetResult(op, RoleOf(op.operand(0)), Type(), in);
    if (op.def().Has(kElementwise)) {
      // The first computed operand's role (the residual add keeps the residual's).
      const Value* from = nullptr;
      for (const Value* v : op.operands()) {
        if (from == nullptr && !v->is_literal() && LaidOut(v)) from = v;
      }
      if (from == nullptr || out->type().dims() != from->type().dims()) {
        return Error(op.loc(), absl::StrCat("`", name, "` is not elementwise on a laid-out value"));
      }
      return SetResult(op, RoleOf(from), Type(), axes_.at(from));
    }
    return Error(op.loc(), absl::StrCat("no Megatron layout rule for `", name, "`"));
  }

  Function& f_;
  const Mesh* mesh_;
  const MegatronLayoutOptions& o_;
  const FunctionsByName* functions_;
  ReturnRoles* return_roles_;
  AxisList cp_, tp_, residual_;
  absl::flat_hash_map<const Value*, Role> roles_;
  // The split the rules give each laid-out value (its type's, unless inferred).
  absl::flat_hash_map<const Value*, std::vector<AxisList>> axes_;
  Location error_loc_;
};

absl::Status CheckOptions(const MegatronLayoutOptions& o) {
  if (o.tp < 1 || o.tp > kMaxMegatronParallelism || o.cp < 1 || o.cp > kMaxMegatronParallelism) {
    return absl::InvalidArgumentError(
        absl::StrCat("tp and cp must be between 1 and ", kMaxMegatronParallelism, ", got tp=",
                     o.tp, " cp=", o.cp));
  }
  if (o.padded_vocabulary != 0 && o.padded_vocabulary < o.vocabulary) {
    return absl::InvalidArgumentError("the padded vocabulary is narrower than the vocabulary");
  }
  return absl::OkStatus();
}

absl::Status LayOut(Function& function, const Mesh* mesh, const MegatronLayoutOptions& options,
                    const FunctionsByName* functions, ReturnRoles& return_roles,
                    Location* where) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  LayoutSetter setter(function, mesh, options, functions, &return_roles);
  absl::Status s = setter.Run();
  if (!s.ok() && where != nullptr) *where = setter.error_loc();
  return s;
}

}  // namespace

const Mesh* AddMegatronMesh(Module& module, const MegatronLayoutOptions& options) {
  if (options.tp * options.cp <= 1) return nullptr;
  std::vector<MeshAxis> axes;
  if (options.cp > 1) axes.push_back({kMegatronCpAxis, options.cp, Location{}});
  if (options.tp > 1) axes.push_back({kMegatronTpAxis, options.tp, Location{}});
  return module.AddMeshFirst(std::make_unique<Mesh>(kMegatronMeshName, std::move(axes)));
}

absl::Status LayOutMegatron(Function& function, const Mesh* mesh,
                            const MegatronLayoutOptions& options, Location* where) {
  ReturnRoles roles;
  std::unique_ptr<FunctionsByName> functions;
  if (function.module() != nullptr) functions = std::make_unique<FunctionsByName>(*function.module());
  return LayOut(function, mesh, options, functions.get(), roles, where);
}

absl::Status LayOutMegatron(Module& module, const MegatronLayoutOptions& options,
                            DiagnosticEngine& diagnostics) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (!module.meshes().empty()) {
    const Mesh* mesh = module.meshes().front();
    diagnostics.Error(mesh->loc(), absl::StrCat("the module has a mesh (@", mesh->name(),
                                                "); the Megatron layout lays out an "
                                                "unannotated model on its own"));
    return absl::InvalidArgumentError("the module has a mesh already");
  }
  const Mesh* mesh = AddMegatronMesh(module, options);
  const FunctionsByName functions(module);
  ReturnRoles roles;
  bool cycle = false;
  const std::vector<Function*> order =
      CalleesFirst(module, [&](Operation& call, const Function&, absl::Span<Function* const>) {
        diagnostics.Error(call.loc(), "a recursive call: the Megatron layout takes no cycles");
        cycle = true;
      });
  if (cycle) return absl::InvalidArgumentError("a recursive call");
  for (Function* f : order) {
    Location where;
    if (absl::Status s = LayOut(*f, mesh, options, &functions, roles, &where); !s.ok()) {
      diagnostics.Error(where, absl::StrCat("@", f->name(), ": ", s.message()));
      return absl::InvalidArgumentError(
          absl::StrCat("the Megatron layout of @", f->name(), " failed"));
    }
  }
  return absl::OkStatus();
}

const OptionSchema<MegatronLayoutOptions>& MegatronLayoutOptions::Schema() {
  using O = MegatronLayoutOptions;
  static const auto* schema =
      &(*new OptionSchema<O>())
           .Int("tp", &O::tp,
                "Tensor-parallel devices: attention heads and MLP columns split over the tp axis",
                1, kMaxMegatronParallelism)
           .Int("cp", &O::cp, "Context-parallel devices: the sequence split over the cp axis everywhere",
                1, kMaxMegatronParallelism)
           .Bool("sp", &O::sequence_parallel,
                 "Sequence parallelism: the residual stream's sequence split over tp too "
                 "(Megatron-LM's --sequence-parallel; nothing with tp=1)");
  return *schema;
}

const PassInfo& MegatronLayoutPass::Info() {
  static const PassInfo* info = new PassInfo(MakePassInfo<MegatronLayoutPass>(
      "megatron-layout",
      "Lay out an unannotated pre-norm transformer as Megatron-LM does: tensor, sequence and "
      "context parallelism on a mesh @m(cp=C, tp=T)"));
  return *info;
}

absl::Status MegatronLayoutPass::Run(Module& module) {
  MegatronLayoutOptions o;
  o.tp = options().tp;
  o.cp = options().cp;
  o.sequence_parallel = options().sequence_parallel;
  return LayOutMegatron(module, o, diagnostics());
}

}  // namespace commir::sharding
