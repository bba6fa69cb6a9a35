// The factor rules of cross_entropy and cross_entropy_grad (rule_builders.h).
#include <vector>

#include "commir/cross_entropy_op.h"
#include "transforms/sharding/rule_builders.h"

namespace commir::sharding {
namespace {

// The token dims of logits [..., V] (the labels' dims), then the class dim. Token dims
// split freely: per-token losses are each device's rows; a reduced loss is each device's
// sum over its rows, combined (with its count of the tokens not ignored, for a mean) in
// one all_reduce that the decomposition emits (token_parallel_loss.h), so the loss comes
// out whole on every device. The class dim (the vocabulary) is split as
// Megatron-LM's vocabulary-parallel cross-entropy splits it (vocab_parallel_loss.h): a
// kStats factor of the forward, whose per-token max, sum of exponentials and target logit
// are combined with all_reduces, and a plain kPass factor of the backward, which each
// shard computes alone.
struct LossFactors {
  std::vector<int> tokens;
  int classes = -1;
};

LossFactors AddLossFactors(OpRule& rule, const Operation& op, FactorKind classes) {
  Type logits = op.operand(0)->type();
  LossFactors f;
  for (int64_t d = 0; d + 1 < logits.rank(); ++d) {
    f.tokens.push_back(rule.AddFactor(logits.dims()[d], FactorKind::kPass));
  }
  f.classes = rule.AddFactor(logits.dims().back(), classes);
  return f;
}

std::vector<std::vector<int>> Each(const std::vector<int>& factors) {
  std::vector<std::vector<int>> dims;
  for (int f : factors) dims.push_back({f});
  return dims;
}

}  // namespace

OpRule CrossEntropyRule(const Operation& op) {
  OpRule rule;
  LossFactors f = AddLossFactors(rule, op, FactorKind::kStats);
  std::vector<int> logits = f.tokens;
  logits.push_back(f.classes);
  const bool per_token = CrossEntropyOptionsOf(op).reduction == LossReduction::kNone;
  rule.operands.push_back({true, Each(logits)});
  rule.operands.push_back({true, Each(f.tokens)});
  rule.results.push_back({true, per_token ? Each(f.tokens) : std::vector<std::vector<int>>{}});
  rule.results.push_back({true, Each(f.tokens)});
  return rule;
}

OpRule CrossEntropyGradRule(const Operation& op) {
  OpRule rule;
  LossFactors f = AddLossFactors(rule, op, FactorKind::kPass);
  std::vector<int> logits = f.tokens;
  logits.push_back(f.classes);
  const bool per_token = CrossEntropyOptionsOf(op).reduction == LossReduction::kNone;
  rule.operands.push_back({true, Each(logits)});
  rule.operands.push_back({true, Each(f.tokens)});
  rule.operands.push_back({true, Each(f.tokens)});
  rule.operands.push_back({true, per_token ? Each(f.tokens) : std::vector<std::vector<int>>{}});
  rule.results.push_back({true, Each(logits)});
  return rule;
}

}  // namespace commir::sharding
