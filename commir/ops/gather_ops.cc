// Ops that move rows chosen by integer indices: gather (an embedding lookup) and its
// adjoint scatter_add (the embedding's gradient).
#include "commir/ops/gather_ops.h"

#include "commir/ops/op_helpers.h"

namespace commir::ops {

absl::StatusOr<GatherShapes> GatherShapesOf(Type table, Type indices, int64_t axis_attr) {
  if (!table.is_tensor() || table.rank() == 0) {
    return OpError("the table must be a tensor of rank >= 1, got %s", table.ToString());
  }
  if (!indices.is_tensor() || (indices.element_type() != ElementType::kI32 &&
                              indices.element_type() != ElementType::kI64)) {
    return OpError("the indices must be an integer tensor (i32 or i64), got %s",
                   indices.ToString());
  }
  absl::StatusOr<int64_t> axis = NormalizeDim(axis_attr, table.rank(), "axis");
  if (!axis.ok()) return axis.status();
  GatherShapes shapes;
  shapes.axis = *axis;
  const std::vector<int64_t>& t = table.dims();
  shapes.result.assign(t.begin(), t.begin() + *axis);
  shapes.result.insert(shapes.result.end(), indices.dims().begin(), indices.dims().end());
  shapes.result.insert(shapes.result.end(), t.begin() + *axis + 1, t.end());
  // Each dimension is bounded by its source, but their product need not fit.
  int64_t elements = 1;
  for (int64_t d : shapes.result) {
    if (__builtin_mul_overflow(elements, d, &elements)) {
      return OpError("the result shape %s has more elements than fit in 64 bits",
                     FormatShape(shapes.result));
    }
  }
  return shapes;
}

namespace {

absl::StatusOr<std::vector<Type>> InferGather(const OpSignature& sig) {
  absl::StatusOr<Type> table = TensorOperand(sig, 0, "the table");
  if (!table.ok()) return table.status();
  absl::StatusOr<Type> indices = TensorOperand(sig, 1, "the indices");
  if (!indices.ok()) return indices.status();
  if (sig.operand_types.size() == 3) {
    if (absl::Status s = IndexOperand(sig, 2, "the offset"); !s.ok()) return s;
    // The offset form is one device's share of a lookup in a split table (lower-to-spmd
    // emits it); a global program looks up in its whole table.
    if (!sig.in_spmd) return OpError("gather takes an offset only in spmd functions");
  }
  absl::StatusOr<GatherShapes> shapes =
      GatherShapesOf(*table, *indices, sig.attrs.GetInt("axis", 0));
  if (!shapes.ok()) return shapes.status();
  return std::vector<Type>{Type::Tensor(table->element_type(), std::move(shapes->result))};
}

absl::StatusOr<std::vector<Type>> InferScatterAdd(const OpSignature& sig) {
  absl::StatusOr<Type> base = TensorOperand(sig, 0, "the base");
  if (!base.ok()) return base.status();
  absl::StatusOr<Type> indices = TensorOperand(sig, 1, "the indices");
  if (!indices.ok()) return indices.status();
  absl::StatusOr<Type> updates = TensorOperand(sig, 2, "the updates");
  if (!updates.ok()) return updates.status();
  if (sig.operand_types.size() == 4) {
    if (absl::Status s = IndexOperand(sig, 3, "the offset"); !s.ok()) return s;
    // As gather's: one device's block of a base split along the axis.
    if (!sig.in_spmd) return OpError("scatter_add takes an offset only in spmd functions");
  }
  absl::StatusOr<GatherShapes> shapes =
      GatherShapesOf(*base, *indices, sig.attrs.GetInt("axis", 0));
  if (!shapes.ok()) return shapes.status();
  if (absl::Status s = RequireSameElementType(*base, *updates, "the base and the updates");
      !s.ok()) {
    return s;
  }
  if (updates->dims() != shapes->result) {
    return OpError("the updates must have shape %s (the gather of %s by %s), got %s",
                   FormatShape(shapes->result), base->ToString(), indices->ToString(),
                   updates->ToString());
  }
  return std::vector<Type>{Type::Tensor(base->element_type(), base->dims())};
}

// Memory-bound: the indices are read once, and each gathered row is read from the table
// and written to the result; rows never looked up are not touched.
OpCost GatherCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {0, ByteSize(sig.operand_types[1]) + 2 * ByteSize(results[0]), 0};
}

// The base copied to the result (read + write), the indices and updates read once, and
// every addressed row of the result read and written again as its update is added: one
// add per update element.
OpCost ScatterAddCost(const OpSignature& sig, absl::Span<const Type> results) {
  const Type updates = sig.operand_types[2];
  double bytes = ByteSize(sig.operand_types[0]) + ByteSize(results[0]) +
                 ByteSize(sig.operand_types[1]) + 3 * ByteSize(updates);
  return {static_cast<double>(updates.num_elements()), bytes, 0};
}

const AttrSpec kAxisAttr = {.name = "axis", .kind = AttrKind::kInt, .required = true};

}  // namespace

void AppendGatherOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kGather,
      .name = "gather",
      .summary = "rows of a table along axis at integer indices",
      .min_operands = 2,
      .max_operands = 3,
      .attrs = {kAxisAttr},
      .infer = InferGather,
      .cost = GatherCost,
      .vjp = GatherVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kScatterAdd,
      .name = "scatter_add",
      .summary = "base plus updates added at integer indices along axis",
      .min_operands = 3,
      .max_operands = 4,
      .attrs = {kAxisAttr},
      .infer = InferScatterAdd,
      .cost = ScatterAddCost,
      .vjp = ScatterAddVjp,
  });
}

}  // namespace commir::ops
