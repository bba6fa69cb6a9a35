// Ops that move data without arithmetic: reshape, transpose, slice, concat, broadcast,
// reshard.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "commir/ops/op_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

absl::StatusOr<std::vector<Type>> InferReshape(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<Type> result = AnnotatedResult(sig);
  if (!result.ok()) return result.status();
  if (!result->is_tensor() || result->element_type() != x->element_type() ||
      result->num_elements() != x->num_elements()) {
    return OpError("reshape keeps the element type and count: %s cannot become %s",
                   x->ToString(), result->ToString());
  }
  return std::vector<Type>{*result};
}

absl::StatusOr<std::vector<Type>> InferTranspose(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  std::vector<int64_t> perm = *sig.attrs.Find("perm")->int_list();
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  bool is_permutation = static_cast<int64_t>(perm.size()) == x->rank();
  for (size_t i = 0; is_permutation && i < sorted.size(); ++i) {
    is_permutation = sorted[i] == static_cast<int64_t>(i);
  }
  if (!is_permutation) {
    return OpError("perm = %s is not a permutation of the %d dims of %s", FormatShape(perm),
                   x->rank(), x->ToString());
  }
  std::vector<int64_t> shape;
  for (int64_t p : perm) shape.push_back(x->dims()[p]);
  return std::vector<Type>{Type::Tensor(x->element_type(), std::move(shape))};
}

absl::StatusOr<std::vector<Type>> InferSlice(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  std::vector<int64_t> start = *sig.attrs.Find("start")->int_list();
  std::vector<int64_t> size = *sig.attrs.Find("size")->int_list();
  if (static_cast<int64_t>(start.size()) != x->rank() ||
      static_cast<int64_t>(size.size()) != x->rank()) {
    return OpError("start and size need %d entries, one per dimension of %s", x->rank(),
                   x->ToString());
  }
  for (int64_t d = 0; d < x->rank(); ++d) {
    int64_t end = 0;
    bool overflow = __builtin_add_overflow(start[d], size[d], &end);
    if (start[d] < 0 || size[d] < 0 || overflow || end > x->dims()[d]) {
      return OpError("slice [%d, %s) is out of range for dimension %d of size %d", start[d],
                     overflow ? absl::StrCat(start[d], " + ", size[d]) : absl::StrCat(end), d,
                     x->dims()[d]);
    }
  }
  return std::vector<Type>{Type::Tensor(x->element_type(), size)};
}

absl::StatusOr<std::vector<Type>> InferConcat(const OpSignature& sig) {
  absl::StatusOr<Type> first = TensorOperand(sig, 0, "operand 0");
  if (!first.ok()) return first.status();
  if (first->rank() == 0) return OpError("concat needs rank >= 1");
  absl::StatusOr<int64_t> dim = NormalizeDim(sig.attrs.GetInt("dim", 0), first->rank(), "dim");
  if (!dim.ok()) return dim.status();
  std::vector<int64_t> shape = first->dims();
  for (size_t i = 1; i < sig.operand_types.size(); ++i) {
    absl::StatusOr<Type> t = TensorOperand(sig, static_cast<int>(i), "every operand");
    if (!t.ok()) return t.status();
    if (absl::Status s = RequireSameElementType(*first, *t, "concat operands"); !s.ok()) return s;
    bool compatible = t->rank() == first->rank();
    for (int64_t d = 0; compatible && d < t->rank(); ++d) {
      compatible = d == *dim || t->dims()[d] == first->dims()[d];
    }
    if (!compatible) {
      return OpError("operand %d (%s) does not match %s outside dimension %d", i, t->ToString(),
                     first->ToString(), *dim);
    }
    absl::StatusOr<int64_t> joined = CheckedDimAdd(shape[*dim], t->dims()[*dim]);
    if (!joined.ok()) return joined.status();
    shape[*dim] = *joined;
  }
  return std::vector<Type>{Type::Tensor(first->element_type(), std::move(shape))};
}

absl::StatusOr<std::vector<Type>> InferBroadcast(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<Type> result = AnnotatedResult(sig);
  if (!result.ok()) return result.status();
  if (!result->is_tensor() || result->element_type() != x->element_type()) {
    return OpError("broadcast keeps the element type: %s cannot become %s", x->ToString(),
                   result->ToString());
  }
  absl::StatusOr<std::vector<int64_t>> shape = BroadcastShapes(x->dims(), result->dims());
  if (!shape.ok() || *shape != result->dims()) {
    return OpError("%s does not broadcast to %s", x->ToString(), result->ToString());
  }
  return std::vector<Type>{*result};
}

absl::StatusOr<std::vector<Type>> InferReshard(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  absl::StatusOr<Type> result = AnnotatedResult(sig);
  if (!result.ok()) return result.status();
  if (!result->SameShapeAndElementType(*x)) {
    return OpError("reshard keeps shape and element type: %s cannot become %s", x->ToString(),
                   result->ToString());
  }
  return std::vector<Type>{*result};
}

OpCost CopyCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {0, StreamingBytes(sig, results), 0};
}

// Reshape and reshard of a contiguous buffer need no copy.
OpCost FreeCost(const OpSignature&, absl::Span<const Type>) { return {}; }

}  // namespace

void AppendLayoutOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kReshape,
      .name = "reshape",
      .summary = "same elements, new shape (row-major)",
      .min_operands = 1,
      .max_operands = 1,
      .traits = kResultTypeRequired,
      .infer = InferReshape,
      .cost = FreeCost,
      .vjp = ReshapeVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kTranspose,
      .name = "transpose",
      .summary = "permute dimensions",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {{.name = "perm", .kind = AttrKind::kIntList, .required = true}},
      .infer = InferTranspose,
      .cost = CopyCost,
      .vjp = TransposeVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kSlice,
      .name = "slice",
      .summary = "static slice",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {
          {.name = "start", .kind = AttrKind::kIntList, .required = true},
          {.name = "size", .kind = AttrKind::kIntList, .required = true},
      },
      .infer = InferSlice,
      .cost = CopyCost,
      .vjp = SliceVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kConcat,
      .name = "concat",
      .summary = "concatenation along dim",
      .min_operands = 1,
      .max_operands = -1,
      .attrs = {{.name = "dim", .kind = AttrKind::kInt, .required = true}},
      .infer = InferConcat,
      .cost = CopyCost,
      .vjp = ConcatVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kBroadcast,
      .name = "broadcast",
      .summary = "NumPy broadcasting to the result shape",
      .min_operands = 1,
      .max_operands = 1,
      .traits = kResultTypeRequired,
      .infer = InferBroadcast,
      .cost = CopyCost,
      .vjp = BroadcastVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kReshard,
      .name = "reshard",
      .summary = "same value, another sharding",
      .min_operands = 1,
      .max_operands = 1,
      .traits = kResultTypeRequired | kGlobalOnly,
      .infer = InferReshard,
      .cost = FreeCost,
      .vjp = ReshardVjp,
  });
}

}  // namespace commir::ops
