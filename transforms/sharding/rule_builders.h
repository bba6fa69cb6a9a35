// The factor rules of the ops of global functions (op_rules.h explains factors), one
// builder per op shape. Which op uses which builder is recorded once, in the sharding
// table (op_sharding.h); call RuleFor rather than these.
#ifndef COMMIR_TRANSFORMS_SHARDING_RULE_BUILDERS_H_
#define COMMIR_TRANSFORMS_SHARDING_RULE_BUILDERS_H_

#include "commir/ir.h"
#include "transforms/sharding/op_rules.h"

namespace commir::sharding {

// Every op with the kElementwise trait: one factor per result dimension, operands
// broadcast NumPy-style, number literals without layout.
OpRule ElementwiseRule(const Operation& op);
OpRule MatmulRule(const Operation& op);
// reduce_sum, reduce_max, reduce_mean: reduced dimensions are kSum (kMax for max).
OpRule ReduceRule(const Operation& op);
// softmax: its `dim` is a kStats factor.
OpRule SoftmaxRule(const Operation& op);
// layer_norm, rms_norm: the last dimension is a kStats factor.
OpRule NormRule(const Operation& op);
// attention: batch, key/value heads with the query heads of each nested under them,
// query sequence and value dim split freely. On a 1-D mesh wider than the key/value
// heads (a multiple of them), the query heads split alone and the key/value heads are
// kept whole on every device (DecomposeAttention keeps each device's own).
OpRule AttentionRule(const Operation& op);
// attention_grad: batch and kv heads split freely; the query heads of a group and the
// query sequence split dq and leave dk, dv partial (summed); the kv sequence and the
// head dims whole.
OpRule AttentionGradRule(const Operation& op);
// cross_entropy, cross_entropy_grad (loss_rules.cc): token dims split freely when the
// loss is per token (reduction = none); the class dim (the vocabulary) a kStats factor of
// the forward and a kPass factor of the backward (vocab_parallel_loss.h).
OpRule CrossEntropyRule(const Operation& op);
OpRule CrossEntropyGradRule(const Operation& op);
// attention_merge: elementwise over the rows [.., S] and the head dim D, which every
// (o, lse) pair shares (the lses have no D: a split of D computes each row's weights on
// every device of it).
OpRule AttentionMergeRule(const Operation& op);
OpRule ReshapeRule(const Operation& op);
OpRule TransposeRule(const Operation& op);
OpRule SliceRule(const Operation& op);
OpRule ConcatRule(const Operation& op);
OpRule BroadcastRule(const Operation& op);
// One result laid out like its one operand (reshard).
OpRule IdentityRule(const Operation& op);
OpRule FullRule(const Operation& op);
// top_k (topk_rule.cc): leading dimensions pass through, the selected one is replicated.
OpRule TopKRule(const Operation& op);
// moe_dispatch, moe_collect (moe_rule.cc): the hidden dimension passes through; the
// routing groups split the tokens and the buffer's columns alike; the rest is whole.
OpRule MoeRule(const Operation& op);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_RULE_BUILDERS_H_
