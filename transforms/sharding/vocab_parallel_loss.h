// Vocabulary parallelism of the loss, as Megatron-LM's vocab_parallel_cross_entropy does
// it: cross_entropy over logits split along the class dim (the output embedding split over
// the vocabulary) never gathers the logits. Each device takes its shard's maximum per
// token, an all_reduce(max) gives the whole row's; its sum of exp(x - max), an
// all_reduce(sum) gives the whole row's, hence lse; then its share of the loss (the
// target logit where the label falls in its classes, label smoothing's sum of its logits,
// and lse once), reduced over the tokens as the op says, and an all_reduce(sum) adds the
// shares. Label smoothing and z-loss cost no more collectives: the smoothed target
// -(1 - s) x_t - s/V sum_j x_j is linear in the logits, so it travels in the same sum, and
// z-loss needs only lse. The backward, softmax(x - lse) minus the smoothed one-hot, is
// local: each device computes its columns of dlogits.
//
// The rules (loss_rules.cc) make the class dim a kStats factor of cross_entropy, so
// propagation chooses the split where the logits arrive split over the vocabulary, and
// costs the three all_reduces the sharding table declares (op_sharding.cc).
#ifndef COMMIR_TRANSFORMS_SHARDING_VOCAB_PARALLEL_LOSS_H_
#define COMMIR_TRANSFORMS_SHARDING_VOCAB_PARALLEL_LOSS_H_

#include <vector>

#include "absl/status/statusor.h"
#include "transforms/sharding/decompositions.h"

namespace commir::sharding {

// cross_entropy with its class dim split: the three all_reduces above around the op's
// vocabulary-parallel form (commir/cross_entropy_op.h); unsplit, the op itself.
DecompositionResult DecomposeVocabParallelCrossEntropy(const DecompositionInput& input);
// cross_entropy_grad with its class dim split: the op's vocabulary-parallel form, each
// device's columns of dlogits, with no communication; unsplit, the op itself.
DecompositionResult DecomposeVocabParallelCrossEntropyGrad(const DecompositionInput& input);

// The pieces the split-token loss (token_parallel_loss.h) combines with its own all_reduce.
// The mesh axes the class dim (the logits' last) is split over; empty when it is whole.
const AxisList& ClassAxes(const DecompositionInput& input);
// With the classes split: the max and sum-of-exponentials all_reduces and the
// vocabulary-parallel cross_entropy with `attrs` (its reduction may differ from the
// op's), whose results are this shard's share of the loss, not yet summed over the
// class axes, and lse.
absl::StatusOr<Operation*> EmitVocabParallelLossShare(const DecompositionInput& input,
                                                      const AttrDict& attrs);
// With the classes split: the vocabulary-parallel cross_entropy_grad of `operands`
// (logits, labels, lse, dloss) with `attrs`.
absl::StatusOr<Value*> EmitVocabParallelLossGrad(const DecompositionInput& input,
                                                 std::vector<OpBuilder::Operand> operands,
                                                 const AttrDict& attrs);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_VOCAB_PARALLEL_LOSS_H_
