// Ops valid only in spmd functions: device coordinates, collectives, dynamic slices and
// counted loops.
#include <algorithm>

#include "commir/mesh.h"
#include "commir/ops/op_helpers.h"

namespace commir::ops {
namespace {

absl::StatusOr<std::vector<Type>> InferRank(const OpSignature& sig) {
  absl::StatusOr<int64_t> n = CollectiveGroupSize(sig);
  if (!n.ok()) return n.status();
  return std::vector<Type>{Type::Index()};
}

// Shared checks of a collective on a dimension: returns the operand, the normalized
// dimension and the group size.
struct DimCollective {
  Type x;
  int64_t dim = 0;
  int64_t group = 1;
};

absl::StatusOr<DimCollective> CheckDimCollective(const OpSignature& sig, absl::string_view attr) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<int64_t> group = CollectiveGroupSize(sig);
  if (!group.ok()) return group.status();
  if (x->rank() == 0) return OpError("a scalar has no dimension for '%s'", attr);
  absl::StatusOr<int64_t> dim = NormalizeDim(sig.attrs.GetInt(attr, 0), x->rank(), attr);
  if (!dim.ok()) return dim.status();
  return DimCollective{*x, *dim, *group};
}

absl::StatusOr<std::vector<Type>> InferAllGather(const OpSignature& sig) {
  absl::StatusOr<DimCollective> c = CheckDimCollective(sig, "dim");
  if (!c.ok()) return c.status();
  std::vector<int64_t> shape = c->x.dims();
  absl::StatusOr<int64_t> gathered = CheckedDimMul(shape[c->dim], c->group);
  if (!gathered.ok()) return gathered.status();
  shape[c->dim] = *gathered;
  return std::vector<Type>{Type::Tensor(c->x.element_type(), std::move(shape))};
}

absl::StatusOr<std::vector<Type>> InferReduceScatter(const OpSignature& sig) {
  absl::StatusOr<DimCollective> c = CheckDimCollective(sig, "dim");
  if (!c.ok()) return c.status();
  std::vector<int64_t> shape = c->x.dims();
  if (shape[c->dim] % c->group != 0) {
    return OpError("dimension %d of size %d is not divisible by the group size %d", c->dim,
                   shape[c->dim], c->group);
  }
  shape[c->dim] /= c->group;
  return std::vector<Type>{Type::Tensor(c->x.element_type(), std::move(shape))};
}

absl::StatusOr<std::vector<Type>> InferAllReduce(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<int64_t> group = CollectiveGroupSize(sig);
  if (!group.ok()) return group.status();
  return std::vector<Type>{*x};
}

absl::StatusOr<std::vector<Type>> InferAllToAll(const OpSignature& sig) {
  absl::StatusOr<DimCollective> split = CheckDimCollective(sig, "split_dim");
  if (!split.ok()) return split.status();
  absl::StatusOr<int64_t> concat =
      NormalizeDim(sig.attrs.GetInt("concat_dim", 0), split->x.rank(), "concat_dim");
  if (!concat.ok()) return concat.status();
  std::vector<int64_t> shape = split->x.dims();
  if (shape[split->dim] % split->group != 0) {
    return OpError("split_dim %d of size %d is not divisible by the group size %d", split->dim,
                   shape[split->dim], split->group);
  }
  shape[split->dim] /= split->group;
  absl::StatusOr<int64_t> concatenated = CheckedDimMul(shape[*concat], split->group);
  if (!concatenated.ok()) return concatenated.status();
  shape[*concat] = *concatenated;
  return std::vector<Type>{Type::Tensor(split->x.element_type(), std::move(shape))};
}

absl::StatusOr<std::vector<Type>> InferShift(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<int64_t> group = CollectiveGroupSize(sig);
  if (!group.ok()) return group.status();
  return std::vector<Type>{*x};
}

absl::StatusOr<std::vector<Type>> InferDynamicSlice(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  if (absl::Status s = IndexOperand(sig, 1, "the offset"); !s.ok()) return s;
  if (x->rank() == 0) return OpError("a scalar cannot be sliced");
  absl::StatusOr<int64_t> dim = NormalizeDim(sig.attrs.GetInt("dim", 0), x->rank(), "dim");
  if (!dim.ok()) return dim.status();
  int64_t size = sig.attrs.GetInt("size", 0);
  if (size < 0 || size > x->dims()[*dim]) {
    return OpError("size = %d does not fit dimension %d of size %d", size, *dim, x->dims()[*dim]);
  }
  std::vector<int64_t> shape = x->dims();
  shape[*dim] = size;
  return std::vector<Type>{Type::Tensor(x->element_type(), std::move(shape))};
}

absl::StatusOr<std::vector<Type>> InferDynamicUpdateSlice(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<Type> update = TensorOperand(sig, 1, "the update");
  if (!update.ok()) return update.status();
  if (absl::Status s = IndexOperand(sig, 2, "the offset"); !s.ok()) return s;
  if (absl::Status s = RequireSameElementType(*x, *update, "the operand and the update");
      !s.ok()) {
    return s;
  }
  if (x->rank() == 0) return OpError("a scalar cannot be updated in slices");
  absl::StatusOr<int64_t> dim = NormalizeDim(sig.attrs.GetInt("dim", 0), x->rank(), "dim");
  if (!dim.ok()) return dim.status();
  bool fits = update->rank() == x->rank();
  for (int64_t d = 0; fits && d < x->rank(); ++d) {
    fits = d == *dim ? update->dims()[d] <= x->dims()[d] : update->dims()[d] == x->dims()[d];
  }
  if (!fits) {
    return OpError("update %s does not fit %s along dimension %d", update->ToString(),
                   x->ToString(), *dim);
  }
  return std::vector<Type>{*x};
}

// The loop's results have the types of its carried values; the body is checked by the
// verifier.
absl::StatusOr<std::vector<Type>> InferFor(const OpSignature& sig) {
  if (GetOpDef(OpKind::kFor).IntAttr(sig.attrs, "step") <= 0) return OpError("the loop step must be positive");
  return std::vector<Type>(sig.operand_types.begin(), sig.operand_types.end());
}

OpCost ReadOnlyCost(const OpSignature&, absl::Span<const Type>) { return {}; }

OpCost CopyCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {0, StreamingBytes(sig, results), 0};
}

// dynamic_update_slice writes the update into its operand's buffer in place (as XLA's
// buffer assignment does when the operand is not used again, which is how the schedules
// use it: a loop's accumulator): the update is read and its region written; the rest of
// the operand is not touched.
OpCost UpdateInPlaceCost(const OpSignature& sig, absl::Span<const Type>) {
  return {0, 2 * ByteSize(sig.operand_types[1]), 0};
}

// Bytes each device sends with ring algorithms, the usual NCCL model.
OpCost AllGatherCost(const OpSignature& sig, absl::Span<const Type> results) {
  double n = static_cast<double>(results[0].num_elements()) / sig.operand_types[0].num_elements();
  return {0, StreamingBytes(sig, results), ByteSize(results[0]) * (n - 1) / n};
}

OpCost ReduceScatterCost(const OpSignature& sig, absl::Span<const Type> results) {
  double in = ByteSize(sig.operand_types[0]);
  double n = in / std::max(1.0, ByteSize(results[0]));
  return {static_cast<double>(sig.operand_types[0].num_elements()), StreamingBytes(sig, results),
          in * (n - 1) / n};
}

OpCost AllReduceCost(const OpSignature& sig, absl::Span<const Type> results) {
  double n = 1;
  if (sig.mesh != nullptr) n = static_cast<double>(sig.mesh->GroupSize(sig.attrs.Find("axis")->axes()));
  double bytes = ByteSize(results[0]);
  return {static_cast<double>(results[0].num_elements()), StreamingBytes(sig, results),
          2 * bytes * (n - 1) / n};
}

OpCost AllToAllCost(const OpSignature& sig, absl::Span<const Type> results) {
  double n = 1;
  if (sig.mesh != nullptr) n = static_cast<double>(sig.mesh->GroupSize(sig.attrs.Find("axis")->axes()));
  return {0, StreamingBytes(sig, results), ByteSize(results[0]) * (n - 1) / n};
}

OpCost ShiftCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {0, StreamingBytes(sig, results), ByteSize(results[0])};
}

}  // namespace

void AppendSpmdOps(std::vector<OpDef>& ops) {
  const AttrSpec axis{.name = "axis", .kind = AttrKind::kAxes, .required = true};
  const AttrSpec reduce{.name = "reduce",
                        .kind = AttrKind::kEnum,
                        .enum_values = {"sum", "max", "min"},
                        .default_value = Attribute::Ident("sum")};
  ops.push_back(OpDef{
      .kind = OpKind::kRank,
      .name = "rank",
      .summary = "this device's coordinate along an axis (group)",
      .min_operands = 0,
      .max_operands = 0,
      .attrs = {axis},
      .traits = kSpmdOnly,
      .infer = InferRank,
      .cost = ReadOnlyCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kAllGather,
      .name = "all_gather",
      .summary = "concatenate the group's parts along dim in coordinate order",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {axis, {.name = "dim", .kind = AttrKind::kInt, .required = true}},
      .traits = kSpmdOnly | kCollective,
      .infer = InferAllGather,
      .cost = AllGatherCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kReduceScatter,
      .name = "reduce_scatter",
      .summary = "reduce over the group, keep block c of dim on coordinate c",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {axis, {.name = "dim", .kind = AttrKind::kInt, .required = true}, reduce},
      .traits = kSpmdOnly | kCollective,
      .infer = InferReduceScatter,
      .cost = ReduceScatterCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kAllReduce,
      .name = "all_reduce",
      .summary = "reduce over the group",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {axis, reduce},
      .traits = kSpmdOnly | kCollective,
      .infer = InferAllReduce,
      .cost = AllReduceCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kAllToAll,
      .name = "all_to_all",
      .summary = "send block j of split_dim to coordinate j, concatenate along concat_dim",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {
          axis,
          {.name = "split_dim", .kind = AttrKind::kInt, .required = true},
          {.name = "concat_dim", .kind = AttrKind::kInt, .required = true},
      },
      .traits = kSpmdOnly | kCollective,
      .infer = InferAllToAll,
      .cost = AllToAllCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kShift,
      .name = "shift",
      .summary = "send to coordinate c+offset, receive from c-offset (mod n)",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {
          axis,
          {.name = "offset", .kind = AttrKind::kInt, .default_value = Attribute::Int(1)},
      },
      .traits = kSpmdOnly | kCollective,
      .infer = InferShift,
      .cost = ShiftCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kDynamicSlice,
      .name = "dynamic_slice",
      .summary = "slice of size along dim from a run-time offset",
      .min_operands = 2,
      .max_operands = 2,
      .attrs = {
          {.name = "dim", .kind = AttrKind::kInt, .required = true},
          {.name = "size", .kind = AttrKind::kInt, .required = true},
      },
      .traits = kSpmdOnly,
      .infer = InferDynamicSlice,
      .cost = CopyCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kDynamicUpdateSlice,
      .name = "dynamic_update_slice",
      .summary = "write update at a run-time offset along dim",
      .min_operands = 3,
      .max_operands = 3,
      .attrs = {{.name = "dim", .kind = AttrKind::kInt, .required = true}},
      .traits = kSpmdOnly,
      .infer = InferDynamicUpdateSlice,
      .cost = UpdateInPlaceCost,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kFor,
      .name = "for",
      .summary = "counted loop with carried values",
      .min_operands = 0,
      .max_operands = -1,
      .min_results = 0,
      .max_results = -1,
      .attrs = {
          {.name = "lower", .kind = AttrKind::kInt, .required = true},
          {.name = "upper", .kind = AttrKind::kInt, .required = true},
          {.name = "step", .kind = AttrKind::kInt, .default_value = Attribute::Int(1)},
      },
      .traits = kSpmdOnly | kHasRegion,
      .infer = InferFor,
      .cost = ReadOnlyCost,
  });
}

}  // namespace commir::ops
