// The factor rules of moe_dispatch and moe_collect, for one-device programs and meshes
// that keep the routing whole.
#include <vector>

#include "transforms/sharding/rule_builders.h"

namespace commir::sharding {

// The hidden dimension passes through: each column is copied on its own. Everything else
// is whole on every device: a choice's position in its expert counts every earlier
// choice of all tokens, so a device holding part of the tokens cannot place its own, and
// the buffer's expert and capacity dimensions are kReplicate factors. Splitting the
// experts (expert parallelism, dispatch and collect as all_to_alls) needs a
// decomposition of its own. Both ops are linear in their rows, so partial rows pass.
OpRule MoeRule(const Operation& op) {
  OpRule rule;
  rule.partial_mode = PartialMode::kFirst;
  const Type rows = op.operand(0)->type();
  const Type indices = op.operand(1)->type();
  const Type result = op.result(0)->type();
  const int hidden = rule.AddFactor(rows.dims().back(), FactorKind::kPass);
  // The rows' and the result's leading dimensions, and the indices' [tokens, k].
  auto whole = [&rule](const Type& t, int64_t count) {
    std::vector<std::vector<int>> dims;
    for (int64_t d = 0; d < count; ++d) {
      dims.push_back({rule.AddFactor(t.dims()[d], FactorKind::kReplicate)});
    }
    return dims;
  };
  std::vector<std::vector<int>> row_dims = whole(rows, rows.rank() - 1);
  row_dims.push_back({hidden});
  std::vector<std::vector<int>> result_dims = whole(result, result.rank() - 1);
  result_dims.push_back({hidden});
  rule.operands.push_back({true, row_dims});
  rule.operands.push_back({true, whole(indices, indices.rank())});
  rule.results.push_back({true, result_dims});
  return rule;
}

}  // namespace commir::sharding
