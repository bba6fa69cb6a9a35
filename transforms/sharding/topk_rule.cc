// The factor rule of top_k.
#include <vector>

#include "transforms/sharding/rule_builders.h"

namespace commir::sharding {

// The leading dimensions pass through to both results. The selected dimension must be
// whole on each device: a device holding part of a row cannot know the row's k largest
// (a two-stage top-k of local top-ks would be an op of its own), so x's last dimension and
// the results' k dimension are kReplicate factors.
OpRule TopKRule(const Operation& op) {
  OpRule rule;
  const Type x = op.operand(0)->type();
  std::vector<std::vector<int>> operand_dims;
  std::vector<std::vector<int>> result_dims;
  for (int64_t d = 0; d + 1 < x.rank(); ++d) {
    const int f = rule.AddFactor(x.dims()[d], FactorKind::kPass);
    operand_dims.push_back({f});
    result_dims.push_back({f});
  }
  operand_dims.push_back({rule.AddFactor(x.dims().back(), FactorKind::kReplicate)});
  result_dims.push_back(
      {rule.AddFactor(op.result(0)->type().dims().back(), FactorKind::kReplicate)});
  rule.operands.push_back({true, operand_dims});
  rule.results.push_back({true, result_dims});
  rule.results.push_back({true, result_dims});
  return rule;
}

}  // namespace commir::sharding
