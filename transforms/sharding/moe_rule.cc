// The factor rules of moe_dispatch and moe_collect, and their per-device form under
// expert parallelism.
#include <optional>
#include <vector>

#include "transforms/sharding/decompositions.h"
#include "transforms/sharding/rule_builders.h"

namespace commir::sharding {

// The hidden dimension passes through: each column is copied on its own. Without
// `groups`, everything else is whole on every device: a choice's position in its expert
// counts every earlier choice of all tokens, so a device holding part of the tokens
// cannot place its own, and the buffer's expert and capacity dimensions are kReplicate
// factors.
//
// With `groups` G > 1 each group of T / G tokens is routed alone into its own G-th of the
// buffer's columns (commir::MoeSlots), so the group is a kPass factor shared by the
// tokens (major, [G, T / G]) and the buffer's columns (major, [G, C]): a device holding
// whole groups of tokens routes them into its own columns of every expert. That is
// Megatron's alltoall dispatcher: the dispatch's natural result has the columns split
// over the token axes, and the expert FFNs' batched matmuls want the expert dimension
// split over `ep`, so the reshard between the two is the dispatch all_to_all (and the one
// before moe_collect the combine all_to_all). The expert dimension itself stays a
// kReplicate factor of both ops: a device cannot route other devices' tokens. Both ops
// are linear in their rows, so partial rows pass.
OpRule MoeRule(const Operation& op) {
  OpRule rule;
  rule.partial_mode = PartialMode::kFirst;
  const bool dispatch = op.Is(OpKind::kMoeDispatch);
  const Type rows = op.operand(0)->type();
  const Type indices = op.operand(1)->type();
  const Type result = op.result(0)->type();
  const Type buffer = dispatch ? result : rows;
  const Type choices = dispatch ? rows : result;  // [T, H] or [T, k, H]
  const int64_t groups = op.attrs().GetInt("groups", 1);
  const int64_t tokens = indices.dims()[0];
  const int hidden = rule.AddFactor(rows.dims().back(), FactorKind::kPass);
  std::vector<int> token_dim;
  std::vector<int> column_dim;
  if (groups > 1) {
    // The verifier checked that the groups divide the tokens and the buffer's columns.
    const int group = rule.AddFactor(groups, FactorKind::kPass);
    token_dim = {group, rule.AddFactor(tokens / groups, FactorKind::kReplicate)};
    column_dim = {group, rule.AddFactor(buffer.dims()[1] / groups, FactorKind::kReplicate)};
  } else {
    token_dim = {rule.AddFactor(tokens, FactorKind::kReplicate)};
    column_dim = {rule.AddFactor(buffer.dims()[1], FactorKind::kReplicate)};
  }
  const int k = rule.AddFactor(indices.dims()[1], FactorKind::kReplicate);
  const int experts = rule.AddFactor(buffer.dims()[0], FactorKind::kReplicate);
  TensorFactors choice_factors{true, {token_dim}};
  if (choices.rank() == 3) choice_factors.dims.push_back({k});
  choice_factors.dims.push_back({hidden});
  const TensorFactors buffer_factors{true, {{experts}, column_dim, {hidden}}};
  rule.operands.push_back(dispatch ? choice_factors : buffer_factors);
  rule.operands.push_back({true, {token_dim, {k}}});
  rule.results.push_back(dispatch ? buffer_factors : choice_factors);
  return rule;
}

// Each device routes its own groups: the op itself with `groups` the local count (the
// group factor's size over the axes splitting it) and, for moe_dispatch, the capacity of
// one group written out, the same C every group has globally.
DecompositionResult DecomposeMoe(const DecompositionInput& in) {
  const int64_t groups = in.op.attrs().GetInt("groups", 1);
  if (groups == 1) return std::nullopt;
  const Mesh& mesh = *in.emitter.function()->mesh();
  // The group factor is the second one MoeRule adds (after the hidden dimension).
  const int64_t split = mesh.GroupSize(in.choice.strategy.factors[1]);
  if (split == 1) return std::nullopt;
  AttrDict attrs = in.op.attrs();
  attrs.Set("groups", Attribute::Int(groups / split));
  if (in.op.Is(OpKind::kMoeDispatch)) {
    attrs.Erase("capacity_factor");
    attrs.Set("capacity", Attribute::Int(in.op.result(0)->type().dims()[1] / groups));
  }
  return EmitPerDeviceOp(in, std::move(attrs));
}

}  // namespace commir::sharding
