#include "transforms/sharding/layout.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "commir/check.h"
#include "commir/status_macros.h"
#include "transforms/sharding/compute_cost.h"

namespace commir::sharding {
namespace {

bool Contains(const AxisList& axes, absl::string_view axis) {
  return std::find(axes.begin(), axes.end(), axis) != axes.end();
}

bool IsPrefix(const AxisList& prefix, const AxisList& list) {
  return prefix.size() <= list.size() && std::equal(prefix.begin(), prefix.end(), list.begin());
}

size_t CommonPrefix(const AxisList& a, const AxisList& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

AxisList Minus(const AxisList& a, const AxisList& b) {
  AxisList out;
  for (const std::string& axis : a) {
    if (!Contains(b, axis)) out.push_back(axis);
  }
  return out;
}

std::string DimAxesText(const AxisList& axes) { return axes.empty() ? "-" : FormatAxes(axes); }

}  // namespace

// ---- Layout ---------------------------------------------------------------------

Layout Layout::Of(Type type, const Mesh& mesh) {
  Layout layout;
  if (!type.is_tensor()) return layout;
  layout.dims = type.dim_axes();
  layout.partial = InMeshOrder(type.partial(), mesh);
  return layout;
}

Layout Layout::Replicated(size_t rank) {
  Layout layout;
  layout.dims.resize(rank);
  return layout;
}

bool Layout::IsReplicated() const {
  if (!partial.empty()) return false;
  return std::all_of(dims.begin(), dims.end(), [](const AxisList& a) { return a.empty(); });
}

bool Layout::UsesAxis(absl::string_view axis) const {
  if (Contains(partial, axis)) return true;
  return std::any_of(dims.begin(), dims.end(),
                     [&](const AxisList& axes) { return Contains(axes, axis); });
}

AxisList Layout::UsedAxes() const {
  AxisList out;
  for (const AxisList& axes : dims) out.insert(out.end(), axes.begin(), axes.end());
  out.insert(out.end(), partial.begin(), partial.end());
  return out;
}

Type Layout::ApplyTo(Type type) const {
  COMMIR_CHECK(partial.empty() || partial_kind == ReductionFn::kSum,
               "a max-partial layout cannot be written in a type");
  return type.WithSharding(dims, partial);
}

std::string Layout::ToString() const {
  std::string out = absl::StrCat("[", absl::StrJoin(dims, ", ", [](std::string* o, const AxisList& a) {
                                   o->append(DimAxesText(a));
                                 }),
                                 "]");
  if (!partial.empty()) {
    absl::StrAppend(&out, partial_kind == ReductionFn::kMax ? " max(" : " partial(",
                    absl::StrJoin(partial, ", "), ")");
  }
  return out;
}

AxisList InMeshOrder(AxisList axes, const Mesh& mesh) {
  auto key = [&](const std::string& axis) {
    std::optional<int> index = mesh.AxisIndex(axis);
    return index ? *index : static_cast<int>(mesh.axes().size());
  };
  std::stable_sort(axes.begin(), axes.end(),
                   [&](const std::string& a, const std::string& b) { return key(a) < key(b); });
  return axes;
}

std::vector<int64_t> LocalDims(absl::Span<const int64_t> global, const Layout& layout,
                               const Mesh& mesh) {
  std::vector<int64_t> dims(global.begin(), global.end());
  for (size_t d = 0; d < dims.size() && d < layout.dims.size(); ++d) {
    int64_t parts = mesh.GroupSize(layout.dims[d]);
    if (parts >= 1) dims[d] /= parts;
  }
  return dims;
}

Type LocalTypeOf(Type global, const Layout& layout, const Mesh& mesh) {
  if (!global.is_tensor()) return global;
  return Type::Tensor(global.element_type(), LocalDims(global.dims(), layout, mesh));
}

bool IsValidLayout(absl::Span<const int64_t> dims, const Layout& layout, const Mesh& mesh) {
  if (layout.dims.size() != dims.size()) return false;
  AxisList seen;
  for (const std::string& axis : layout.UsedAxes()) {
    if (!mesh.AxisIndex(axis) || Contains(seen, axis)) return false;
    seen.push_back(axis);
  }
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] % mesh.GroupSize(layout.dims[d]) != 0) return false;
  }
  return true;
}

// ---- Planning -------------------------------------------------------------------

std::string StepToString(const ReshardStep& step) {
  std::string axes = FormatAxes(step.axes);
  std::string reduce = step.reduce == ReductionFn::kMax ? " max" : "";
  switch (step.kind) {
    case ReshardStep::Kind::kAllReduce: return absl::StrCat("all_reduce", reduce, "(", axes, ")");
    case ReshardStep::Kind::kReduceScatter:
      return absl::StrCat("reduce_scatter", reduce, "(dim ", step.dim, " over ", axes, ")");
    case ReshardStep::Kind::kAllGather:
      return absl::StrCat("all_gather(dim ", step.dim, " over ", axes, ")");
    case ReshardStep::Kind::kAllToAll:
      return absl::StrCat("all_to_all(", axes, " from dim ", step.concat_dim, " to dim ", step.dim,
                          ")");
    case ReshardStep::Kind::kSlice: return absl::StrCat("slice(dim ", step.dim, " over ", axes, ")");
    case ReshardStep::Kind::kMakePartial: return absl::StrCat("make_partial(", axes, ")");
  }
  return "";
}

namespace {

// Step 1 of the plan: reduce the partial axes `to` does not keep.
void PlanPartialReduction(const Layout& to, const Mesh& mesh, Layout& cur,
                          std::vector<ReshardStep>& steps) {
  // A max partial never survives into `to` (types hold sums only): reduce all of it.
  AxisList reduce = cur.partial_kind == ReductionFn::kMax ? cur.partial : Minus(cur.partial, to.partial);
  if (reduce.empty()) return;
  ReductionFn kind = cur.partial_kind;
  AxisList keep = Minus(cur.partial, reduce);
  for (size_t d = 0; d < cur.dims.size() && !reduce.empty(); ++d) {
    if (!IsPrefix(cur.dims[d], to.dims[d])) continue;
    AxisList run;
    for (size_t k = cur.dims[d].size(); k < to.dims[d].size() && Contains(reduce, to.dims[d][k]);
         ++k) {
      run.push_back(to.dims[d][k]);
    }
    if (run.empty()) continue;
    cur.dims[d].insert(cur.dims[d].end(), run.begin(), run.end());
    reduce = Minus(reduce, run);
    cur.partial = Minus(cur.partial, run);
    steps.push_back({ReshardStep::Kind::kReduceScatter, run, static_cast<int64_t>(d), 0, kind, cur});
  }
  if (!reduce.empty()) {
    cur.partial = keep;
    steps.push_back({ReshardStep::Kind::kAllReduce, InMeshOrder(reduce, mesh), 0, 0, kind, cur});
  }
  cur.partial = keep;
  cur.partial_kind = ReductionFn::kSum;
  if (!steps.empty()) steps.back().after = cur;
}

// The dimension that `to` wants `axis` on next (its current axes being a prefix of what
// `to` wants), other than `from_dim`; -1 if none.
int MoveTarget(const Layout& cur, const Layout& to, const std::string& axis, size_t from_dim) {
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    if (d == from_dim || !IsPrefix(cur.dims[d], to.dims[d])) continue;
    if (to.dims[d].size() > cur.dims[d].size() && to.dims[d][cur.dims[d].size()] == axis) {
      return static_cast<int>(d);
    }
  }
  return -1;
}

}  // namespace

Layout ReducePartial(const Layout& from, const Layout& to, const Mesh& mesh) {
  Layout cur = from;
  std::vector<ReshardStep> steps;
  PlanPartialReduction(to, mesh, cur, steps);
  return cur;
}

std::vector<ReshardStep> PlanReshard(absl::Span<const int64_t> global_dims, const Layout& from,
                                     const Layout& to, const Mesh& mesh) {
  std::vector<ReshardStep> steps;
  if (from == to) return steps;
  COMMIR_CHECK(from.rank() == to.rank() && from.rank() == global_dims.size(),
               "resharding between layouts of different ranks");
  COMMIR_CHECK(to.partial.empty() || to.partial_kind == ReductionFn::kSum,
               "cannot reshard to a max partial");
  Layout cur = from;
  PlanPartialReduction(to, mesh, cur, steps);

  // Step 2: axes leave dimensions, by all_to_all where `to` wants them elsewhere.
  const size_t rank = cur.dims.size();
  for (;;) {
    bool moved = true;
    while (moved) {
      moved = false;
      for (size_t d = 0; d < rank; ++d) {
        if (IsPrefix(cur.dims[d], to.dims[d])) continue;
        std::string axis = cur.dims[d].back();
        int target = MoveTarget(cur, to, axis, d);
        if (target < 0) continue;
        cur.dims[d].pop_back();
        cur.dims[target].push_back(axis);
        steps.push_back({ReshardStep::Kind::kAllToAll, {axis}, target, static_cast<int64_t>(d),
                         ReductionFn::kSum, cur});
        moved = true;
      }
    }
    bool gathered = false;
    for (size_t d = 0; d < rank; ++d) {
      if (IsPrefix(cur.dims[d], to.dims[d])) continue;
      size_t keep = CommonPrefix(cur.dims[d], to.dims[d]);
      size_t k = cur.dims[d].size();
      while (k > keep && MoveTarget(cur, to, cur.dims[d][k - 1], d) < 0) --k;
      if (k == cur.dims[d].size()) continue;  // its minor axis can move now: next round
      AxisList run(cur.dims[d].begin() + static_cast<std::ptrdiff_t>(k), cur.dims[d].end());
      cur.dims[d].resize(k);
      steps.push_back({ReshardStep::Kind::kAllGather, run, static_cast<int64_t>(d), 0,
                       ReductionFn::kSum, cur});
      gathered = true;
    }
    if (!gathered) break;
  }

  // Step 3: local slices for the axes `to` adds.
  for (size_t d = 0; d < rank; ++d) {
    COMMIR_CHECK(IsPrefix(cur.dims[d], to.dims[d]), "reshard planning left an axis behind");
    if (cur.dims[d].size() == to.dims[d].size()) continue;
    AxisList added(to.dims[d].begin() + static_cast<std::ptrdiff_t>(cur.dims[d].size()),
                   to.dims[d].end());
    cur.dims[d] = to.dims[d];
    steps.push_back(
        {ReshardStep::Kind::kSlice, added, static_cast<int64_t>(d), 0, ReductionFn::kSum, cur});
  }

  // Step 4: become partial over the axes `to` adds to the partial set.
  AxisList added = Minus(to.partial, cur.partial);
  if (!added.empty()) {
    cur.partial = to.partial;
    cur.partial_kind = ReductionFn::kSum;
    steps.push_back({ReshardStep::Kind::kMakePartial, added, 0, 0, ReductionFn::kSum, cur});
  }
  COMMIR_CHECK(cur == to, "reshard planning did not reach its target");
  return steps;
}

// ---- Cost -----------------------------------------------------------------------

AttrDict AxisAttrs(const AxisList& axes) {
  AttrDict attrs;
  attrs.Set("axis", Attribute::Axes(axes));
  return attrs;
}

namespace {

// The spmd op (kind and attributes) that carries out a collective step.
OpKind StepOp(const ReshardStep& step, AttrDict& attrs) {
  attrs = AxisAttrs(step.axes);
  if (step.reduce == ReductionFn::kMax) attrs.Set("reduce", Attribute::Ident("max"));
  switch (step.kind) {
    case ReshardStep::Kind::kAllReduce: return OpKind::kAllReduce;
    case ReshardStep::Kind::kReduceScatter:
      attrs.Set("dim", Attribute::Int(step.dim));
      return OpKind::kReduceScatter;
    case ReshardStep::Kind::kAllGather:
      attrs.Set("dim", Attribute::Int(step.dim));
      return OpKind::kAllGather;
    case ReshardStep::Kind::kAllToAll:
      attrs.Set("split_dim", Attribute::Int(step.dim));
      attrs.Set("concat_dim", Attribute::Int(step.concat_dim));
      return OpKind::kAllToAll;
    case ReshardStep::Kind::kSlice:
    case ReshardStep::Kind::kMakePartial: break;
  }
  return OpKind::kDynamicSlice;
}

bool IsCollectiveStep(const ReshardStep& step) {
  return step.kind != ReshardStep::Kind::kSlice && step.kind != ReshardStep::Kind::kMakePartial;
}

// Bytes each device sends for `steps`, each collective's weighted by `weight` of it.
template <typename Weight>
double WeightedPlanBytes(Type global, const Layout& from, absl::Span<const ReshardStep> steps,
                         const Mesh& mesh, Weight weight) {
  double bytes = 0;
  Layout cur = from;
  for (const ReshardStep& step : steps) {
    if (IsCollectiveStep(step)) {
      AttrDict attrs;
      OpKind kind = StepOp(step, attrs);
      Type operand = LocalTypeOf(global, cur, mesh);
      Type result = LocalTypeOf(global, step.after, mesh);
      Type operands[] = {operand};
      Type results[] = {result};
      OpSignature sig{operands, attrs, {}, 1, &mesh, true};
      bytes += weight(step) *
               GetOpDef(kind).cost(sig, absl::MakeConstSpan(results)).bytes_communicated;
    }
    cur = step.after;
  }
  return bytes;
}

}  // namespace

double PlanBytes(Type global, const Layout& from, absl::Span<const ReshardStep> steps,
                 const Mesh& mesh) {
  return WeightedPlanBytes(global, from, steps, mesh, [](const ReshardStep&) { return 1.0; });
}

double ReshardBytes(Type global, const Layout& from, const Layout& to, const Mesh& mesh) {
  if (from == to) return 0;
  return PlanBytes(global, from, PlanReshard(global.dims(), from, to, mesh), mesh);
}

int CollectiveCount(absl::Span<const ReshardStep> steps) {
  int n = 0;
  for (const ReshardStep& step : steps) n += IsCollectiveStep(step) ? 1 : 0;
  return n;
}

double ReshardCost(Type global, const Layout& from, const Layout& to, const Mesh& mesh) {
  if (from == to) return 0;
  std::vector<ReshardStep> steps = PlanReshard(global.dims(), from, to, mesh);
  // A collective whose group spans nodes moves its bytes at the network's bandwidth.
  double bytes = WeightedPlanBytes(global, from, steps, mesh, [&](const ReshardStep& step) {
    return CollectiveByteWeight(mesh, step.axes);
  });
  return bytes + kCollectiveLatencyBytes * CollectiveCount(steps);
}

// ---- Emission -------------------------------------------------------------------

namespace {

absl::string_view StepTag(ReshardStep::Kind kind) {
  switch (kind) {
    case ReshardStep::Kind::kAllReduce: return "ar";
    case ReshardStep::Kind::kReduceScatter: return "rs";
    case ReshardStep::Kind::kAllGather: return "ag";
    case ReshardStep::Kind::kAllToAll: return "a2a";
    case ReshardStep::Kind::kSlice: return "sl";
    case ReshardStep::Kind::kMakePartial: return "pt";
  }
  return "";
}

// An index number literal operand.
OpBuilder::Operand Literal(int64_t number) {
  return OpBuilder::Operand::Literal(static_cast<double>(number), Type::Index());
}

// `rank(axes) * block` as an index value.
absl::StatusOr<Value*> BlockOffset(OpBuilder& e, const AxisList& axes, int64_t block) {
  COMMIR_ASSIGN_OR_RETURN(Value* rank, e.CreateValue(OpKind::kRank, {}, AxisAttrs(axes), {}));
  if (block == 1) return rank;
  return e.CreateValue(OpKind::kMul, {rank, Literal(block)});
}

AttrDict SliceAttrs(int64_t dim, int64_t size) {
  AttrDict attrs;
  attrs.Set("dim", Attribute::Int(dim));
  attrs.Set("size", Attribute::Int(size));
  return attrs;
}

// The value on group coordinate 0 along `axes`, zeros elsewhere.
absl::StatusOr<Value*> MakePartial(OpBuilder& e, Value* value, const AxisList& axes) {
  const Mesh& mesh = *e.function()->mesh();
  int64_t n = mesh.GroupSize(axes);
  if (n == 1) return value;
  // Zeros are a partial sum of zeros already, on every coordinate (the base a
  // scatter_add of split updates adds into, an accumulator's start).
  if (const Operation* def = value->defining_op(); def != nullptr && def->Is(OpKind::kFull)) {
    const Attribute* fill = def->attrs().Find("value");
    if (fill != nullptr && ((fill->kind() == Attribute::Kind::kFloat && fill->float_value() == 0) ||
                            (fill->kind() == Attribute::Kind::kInt && fill->int_value() == 0))) {
      return value;
    }
  }
  Type type = value->type();
  Value* x = value;
  bool scalar = type.rank() == 0;
  if (scalar) {
    Type vector = Type::Tensor(type.element_type(), {1});
    COMMIR_ASSIGN_OR_RETURN(x, e.CreateValue(OpKind::kReshape, {x}, {}, {vector}));
  }
  Type local = x->type();
  AttrDict zero;
  zero.Set("value", IsFloatType(local.element_type()) ? Attribute::Float(0.0) : Attribute::Int(0));
  COMMIR_ASSIGN_OR_RETURN(Value* zeros, e.CreateValue(OpKind::kFull, {}, std::move(zero), {local}));
  AttrDict concat_dim;
  concat_dim.Set("dim", Attribute::Int(0));
  COMMIR_ASSIGN_OR_RETURN(Value* joined,
                          e.CreateValue(OpKind::kConcat, {x, zeros}, std::move(concat_dim)));
  // (rank + n - 1) div n is 0 on coordinate 0 and 1 elsewhere.
  COMMIR_ASSIGN_OR_RETURN(Value* rank, e.CreateValue(OpKind::kRank, {}, AxisAttrs(axes)));
  COMMIR_ASSIGN_OR_RETURN(Value* shifted, e.CreateValue(OpKind::kAdd, {rank, Literal(n - 1)}));
  COMMIR_ASSIGN_OR_RETURN(Value* offset, e.CreateValue(OpKind::kDiv, {shifted, Literal(n)}));
  int64_t rows = local.dims()[0];
  if (rows != 1) {
    COMMIR_ASSIGN_OR_RETURN(offset, e.CreateValue(OpKind::kMul, {offset, Literal(rows)}));
  }
  COMMIR_ASSIGN_OR_RETURN(
      Value* kept, e.CreateValue(OpKind::kDynamicSlice, {joined, offset}, SliceAttrs(0, rows)));
  if (!scalar) return kept;
  return e.CreateValue(OpKind::kReshape, {kept}, {}, {type});
}

}  // namespace

absl::StatusOr<Value*> EmitReshard(OpBuilder& emitter, Value* value, Type global, const Layout& from,
                                   const Layout& to, const std::string& final_name) {
  const Mesh& mesh = *emitter.function()->mesh();
  std::vector<ReshardStep> steps = PlanReshard(global.dims(), from, to, mesh);
  const std::string base = value->name();
  Value* cur = value;
  for (size_t i = 0; i < steps.size(); ++i) {
    const ReshardStep& step = steps[i];
    absl::StatusOr<Value*> next;
    if (IsCollectiveStep(step)) {
      AttrDict attrs;
      OpKind kind = StepOp(step, attrs);
      next = emitter.CreateValue(kind, {cur}, std::move(attrs));
    } else if (step.kind == ReshardStep::Kind::kSlice) {
      int64_t size = LocalTypeOf(global, step.after, mesh).dims()[step.dim];
      COMMIR_ASSIGN_OR_RETURN(Value* offset, BlockOffset(emitter, step.axes, size));
      next = emitter.CreateValue(OpKind::kDynamicSlice, {cur, offset}, SliceAttrs(step.dim, size));
    } else {
      next = MakePartial(emitter, cur, step.axes);
    }
    COMMIR_ASSIGN_OR_RETURN(cur, std::move(next));
    if (i + 1 == steps.size() && !final_name.empty()) {
      cur->set_name(final_name);
    } else if (!base.empty()) {
      cur->set_name(absl::StrCat(base, "_", StepTag(step.kind)));
    }
  }
  return cur;
}

}  // namespace commir::sharding
