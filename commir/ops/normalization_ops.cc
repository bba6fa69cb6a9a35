// Reductions, softmax and the norms.
#include <algorithm>

#include "commir/ops/op_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

absl::StatusOr<std::vector<int64_t>> ReducedDims(const OpSignature& sig, Type x) {
  std::vector<int64_t> dims = *sig.attrs.Find("dims")->int_list();
  for (int64_t& d : dims) {
    absl::StatusOr<int64_t> normalized = NormalizeDim(d, x.rank(), "dims");
    if (!normalized.ok()) return normalized.status();
    d = *normalized;
  }
  std::vector<int64_t> sorted = dims;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return OpError("dims lists a dimension twice");
  }
  return sorted;
}

template <OpKind kKind>
absl::StatusOr<std::vector<Type>> InferReduce(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  if (kKind == OpKind::kReduceMean) {
    if (absl::Status s = RequireFloat(*x, "the operand"); !s.ok()) return s;
  }
  absl::StatusOr<std::vector<int64_t>> reduced = ReducedDims(sig, *x);
  if (!reduced.ok()) return reduced.status();
  bool keepdim = GetOpDef(kKind).BoolAttr(sig.attrs, "keepdim");
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < x->rank(); ++d) {
    bool is_reduced = std::binary_search(reduced->begin(), reduced->end(), d);
    if (!is_reduced) shape.push_back(x->dims()[d]);
    else if (keepdim) shape.push_back(1);
  }
  return std::vector<Type>{Type::Tensor(x->element_type(), std::move(shape))};
}

OpCost ReduceCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {static_cast<double>(sig.operand_types[0].num_elements()), StreamingBytes(sig, results), 0};
}

absl::StatusOr<std::vector<Type>> InferSoftmax(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  if (absl::Status s = RequireFloat(*x, "the operand"); !s.ok()) return s;
  if (x->rank() == 0) return OpError("softmax needs rank >= 1");
  absl::StatusOr<int64_t> dim = NormalizeDim(GetOpDef(OpKind::kSoftmax).IntAttr(sig.attrs, "dim"), x->rank(), "dim");
  if (!dim.ok()) return dim.status();
  return std::vector<Type>{x->WithoutSharding()};
}

// layernorm(x, weight, bias) and rmsnorm(x, weight): parameters are vectors over the
// last dimension of x.
absl::StatusOr<std::vector<Type>> InferNorm(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  if (absl::Status s = RequireFloat(*x, "the operand"); !s.ok()) return s;
  if (x->rank() == 0) return OpError("normalization needs rank >= 1");
  int64_t features = x->dims().back();
  for (size_t i = 1; i < sig.operand_types.size(); ++i) {
    const char* role = i == 1 ? "weight" : "bias";
    absl::StatusOr<Type> p = TensorOperand(sig, static_cast<int>(i), role);
    if (!p.ok()) return p.status();
    if (p->dims() != std::vector<int64_t>{features}) {
      return OpError("%s must be [%d] to match the last dimension of %s, got %s", role, features,
                     x->ToString(), p->ToString());
    }
    if (absl::Status s = RequireSameElementType(*x, *p, "the operand and the parameters");
        !s.ok()) {
      return s;
    }
  }
  return std::vector<Type>{x->WithoutSharding()};
}

OpCost NormCost(const OpSignature& sig, absl::Span<const Type> results) {
  return {5.0 * sig.operand_types[0].num_elements(), StreamingBytes(sig, results), 0};
}

std::vector<AttrSpec> ReduceAttrs() {
  return {
      {.name = "dims", .kind = AttrKind::kIntList, .required = true},
      {.name = "keepdim", .kind = AttrKind::kBool, .default_value = Attribute::Bool(false)},
  };
}

// OpDef::reduction_fn of an op that always computes `kFn`.
template <ReductionFn kFn>
ReductionFn Reduces(const AttrDict&) {
  return kFn;
}

}  // namespace

void AppendNormalizationOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kReduceSum,
      .name = "reduce_sum",
      .summary = "sum over dims",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = ReduceAttrs(),
      .infer = InferReduce<OpKind::kReduceSum>,
      .cost = ReduceCost,
      .reduction_fn = Reduces<ReductionFn::kSum>,
      .vjp = ReduceVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kReduceMax,
      .name = "reduce_max",
      .summary = "maximum over dims",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = ReduceAttrs(),
      .infer = InferReduce<OpKind::kReduceMax>,
      .cost = ReduceCost,
      .reduction_fn = Reduces<ReductionFn::kMax>,
      .vjp = ReduceVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kReduceMean,
      .name = "reduce_mean",
      .summary = "mean over dims",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = ReduceAttrs(),
      .infer = InferReduce<OpKind::kReduceMean>,
      .cost = ReduceCost,
      .reduction_fn = Reduces<ReductionFn::kMean>,
      .vjp = ReduceVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kSoftmax,
      .name = "softmax",
      .summary = "softmax along dim, computed in f32",
      .min_operands = 1,
      .max_operands = 1,
      .attrs = {{.name = "dim", .kind = AttrKind::kInt, .default_value = Attribute::Int(-1)}},
      .infer = InferSoftmax,
      .cost = NormCost,
      .vjp = SoftmaxVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kLayerNorm,
      .name = "layernorm",
      .summary = "layer normalization over the last dim",
      .min_operands = 3,
      .max_operands = 3,
      .attrs = {
          {.name = "eps", .kind = AttrKind::kNumber, .default_value = Attribute::Float(1e-5)},
      },
      .infer = InferNorm,
      .cost = NormCost,
      .vjp = LayerNormVjp,
  });
  ops.push_back(OpDef{
      .kind = OpKind::kRmsNorm,
      .name = "rmsnorm",
      .summary = "RMS normalization over the last dim",
      .min_operands = 2,
      .max_operands = 2,
      .attrs = {
          {.name = "eps", .kind = AttrKind::kNumber, .default_value = Attribute::Float(1e-6)},
      },
      .infer = InferNorm,
      .cost = NormCost,
      .vjp = RmsNormVjp,
  });
}

}  // namespace commir::ops
