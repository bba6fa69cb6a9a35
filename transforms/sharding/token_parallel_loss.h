// A reduced loss over split tokens, as Megatron-LM and PyTorch data parallelism compute
// it: cross_entropy with reduction = mean or sum over logits whose token dims are split
// (over dp, cp, or a sequence-parallel tp) never gathers the logits. Each device reduces
// its own tokens by sum (through the vocabulary-parallel form where the classes are split
// too, vocab_parallel_loss.h); a sum then needs one all_reduce of that scalar over the
// token axes. A mean divides by the count of the tokens not ignored over ALL devices,
// which no device knows alone, so each device also counts its own, and ONE all_reduce
// over the token axes carries both as a 2-element vector [sum, count] (one collective's
// latency, not two; the count is an integer, exact in f32 below 2^24 tokens and in f64
// for f64 logits), after which every device divides: exactly the one-device mean, also
// where the ignored tokens are spread unevenly over the shards.
//
// The backward of a mean, cross_entropy_grad with split tokens, scales each device's
// rows by dloss / count with the global count: one scalar all_reduce of the local counts
// over the token axes (the forward's is not carried: the gradient op has no operand for
// it). A sum's backward needs nothing: each row gets dloss.
#ifndef COMMIR_TRANSFORMS_SHARDING_TOKEN_PARALLEL_LOSS_H_
#define COMMIR_TRANSFORMS_SHARDING_TOKEN_PARALLEL_LOSS_H_

#include "transforms/sharding/decompositions.h"

namespace commir::sharding {

// cross_entropy: the split tokens above, with or without split classes; split classes
// alone, or per-token losses, the vocabulary-parallel decomposition; else the op itself.
DecompositionResult DecomposeCrossEntropy(const DecompositionInput& input);
// cross_entropy_grad: a mean over split tokens scaled by the global count, with or
// without split classes; otherwise the vocabulary-parallel decomposition.
DecompositionResult DecomposeCrossEntropyGrad(const DecompositionInput& input);

}  // namespace commir::sharding

#endif  // COMMIR_TRANSFORMS_SHARDING_TOKEN_PARALLEL_LOSS_H_
