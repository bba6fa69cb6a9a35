// What a layer keeps for its backward, measured on its partitioned (and scheduled)
// forward @f and gradient @f_grad (autodiff{seed=cotangents}): the forward values the
// gradient function's backward ops read, the layer input included. The recomputed
// forward inside @f_grad is told from the backward by identity of computation
// (transforms/autodiff/forward_copy.h), not by value names.
//
// Counted as Megatron-LM keeps them (see saved_activations.cc): a tp all_gather's result
// as its sharded operand, a reshaped or transposed view of a kept value once, not the
// layer's output (the next layer's input), and not a value computed from the weights
// alone (a gathered weight: parameter memory, which Megatron-LM saves as the parameter).
#ifndef COMMIR_SEARCH_PLAN_SAVED_ACTIVATIONS_H_
#define COMMIR_SEARCH_PLAN_SAVED_ACTIVATIONS_H_

#include <cstdint>
#include <vector>

#include "commir/ir.h"

namespace commir::search::plan {

struct SavedActivations {
  int64_t all_bytes = 0;
  // Of those, the attention's output and its reshaped or transposed views (what
  // selective recomputation re-runs the attention to get).
  int64_t attention_bytes = 0;
  // The values kept (one per layout root, in @f_grad's order), each with the bytes
  // counted for it.
  struct Kept {
    const Value* recomputed = nullptr;  // the value of `gradient`
    // The value of `forward` it recomputes; null for a value the forward does not
    // return (an attention's log-sum-exp, which only the gradient's copy returns).
    const Value* forward = nullptr;
    int64_t bytes = 0;
  };
  std::vector<Kept> kept;
};

SavedActivations MeasureSaved(const Function& forward, const Function& gradient);

// An unfused attention's batched GEMM (layer_program.h: the scores q k^T and the
// probabilities times v): the layer's only matmuls with a [b, heads, s, *] result (its
// projections' are [b, s, width]).
bool IsUnfusedAttentionGemm(const Operation& op);

// Bytes one device holds of `type` in `function`: spmd bodies carry per-device types, but
// a type that still names axes (a signature's) is divided by their sizes on the
// function's mesh, whatever the axes are called.
int64_t DeviceBytes(Type type, const Function& function);

}  // namespace commir::search::plan

#endif  // COMMIR_SEARCH_PLAN_SAVED_ACTIVATIONS_H_
