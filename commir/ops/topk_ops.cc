// top_k: the k largest entries of the last dimension, with their positions.
#include <cmath>

#include "commir/ops/op_helpers.h"
#include "commir/ops/vjp_rules.h"

namespace commir::ops {
namespace {

// values: x's element type; indices: i64, as torch.topk returns them, so a captured
// model's index arithmetic keeps its types.
absl::StatusOr<std::vector<Type>> InferTopK(const OpSignature& sig) {
  absl::StatusOr<Type> x = TensorOperand(sig, 0, "the operand");
  if (!x.ok()) return x.status();
  if (x->element_type() == ElementType::kI1) {
    return OpError("top_k needs a numeric operand, got %s", x->ToString());
  }
  if (x->rank() == 0) return OpError("top_k selects along the last dimension and needs rank >= 1");
  const int64_t k = sig.attrs.Find("k")->int_value();
  const int64_t n = x->dims().back();
  if (k < 1 || k > n) {
    return OpError("k = %d must be in [1, %d], the last dimension of %s", k, n, x->ToString());
  }
  std::vector<int64_t> dims = x->dims();
  dims.back() = k;
  return std::vector<Type>{Type::Tensor(x->element_type(), dims),
                           Type::Tensor(ElementType::kI64, dims)};
}

// One pass over x keeping a sorted list of the k best per row: each element is compared
// with about log2(k + 1) kept ones (a binary search of the list); memory-bound in
// practice, as one kernel that reads x once and writes both results.
OpCost TopKCost(const OpSignature& sig, absl::Span<const Type> results) {
  const double k = static_cast<double>(results[0].dims().back());
  const double comparisons = std::ceil(std::log2(k + 1.0));
  return {comparisons * static_cast<double>(sig.operand_types[0].num_elements()),
          StreamingBytes(sig, results), 0};
}

}  // namespace

void AppendTopKOps(std::vector<OpDef>& ops) {
  ops.push_back(OpDef{
      .kind = OpKind::kTopK,
      .name = "top_k",
      .summary = "the k largest entries of the last dimension, sorted descending, and their "
                 "indices (ties: the lower index first)",
      .min_operands = 1,
      .max_operands = 1,
      .min_results = 2,
      .max_results = 2,
      .attrs = {{.name = "k", .kind = AttrKind::kInt, .required = true}},
      .infer = InferTopK,
      .cost = TopKCost,
      .vjp = TopKVjp,
  });
}

}  // namespace commir::ops
