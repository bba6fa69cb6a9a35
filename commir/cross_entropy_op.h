// What cross_entropy and cross_entropy_grad compute, read from an op once: the
// reduction, ignore_index, label smoothing and z-loss every executor and lowering needs.
//
// cross_entropy(logits [..., V], labels [...]) -> loss, lse: per token i with target t
// and lse_i = log sum_j exp(x_ij),
//   loss_i = (1 - s) (lse_i - x_it) + s (lse_i - mean_j x_ij) + z lse_i^2
// (s: label_smoothing, as torch.nn.functional.cross_entropy; z: PaLM's z-loss), 0 where
// t == ignore_index; reduced by sum, by mean over the tokens not ignored, or not at all.
// cross_entropy_grad(logits, labels, lse, dloss) -> dlogits:
//   w_i (p_ij (1 + 2 z lse_i) - (1 - s) [j == t_i] - s / V),  p_ij = exp(x_ij - lse_i),
// with w_i dloss (sum), dloss / count (mean) or dloss_i (none), and 0 for ignored tokens.
//
// The vocabulary-parallel form (spmd functions; loss_ops.cc) holds the classes [offset,
// offset + V_local) of `classes` = V: cross_entropy(logits, labels, lse, offset) returns
// the shard's share of the loss, summed over the shards:
//   [offset == 0] (lse_i + z lse_i^2) - (1 - s) [t_i in the shard] x_it - s/V sum_j x_ij,
// reduced as the op says (so the shares of a mean sum to the mean), and lse itself;
// cross_entropy_grad(logits, labels, lse, dloss, offset) returns the shard's columns of
// dlogits (the one-hot only where t_i falls in the shard, s/V with the whole V).
#ifndef COMMIR_COMMIR_CROSS_ENTROPY_OP_H_
#define COMMIR_COMMIR_CROSS_ENTROPY_OP_H_

#include <cstdint>

#include "commir/check.h"
#include "commir/ir.h"

namespace commir {

enum class LossReduction { kMean, kSum, kNone };

struct CrossEntropyOptions {
  LossReduction reduction = LossReduction::kMean;
  int64_t ignore_index = -100;
  double label_smoothing = 0;
  double z_loss = 0;
  // The whole vocabulary's class count in the vocabulary-parallel form; 0 otherwise.
  int64_t classes = 0;
};

// cross_entropy_grad's operands (and the vocabulary-parallel cross_entropy's first three).
enum CrossEntropyGradOperand { kCeLogits = 0, kCeLabels = 1, kCeLse = 2, kCeDloss = 3 };

// One device's block of the classes in the vocabulary-parallel form: the global index of
// its first class and the whole vocabulary's size.
struct VocabShard {
  int64_t offset = 0;
  int64_t classes = 0;
};

inline LossReduction ParseLossReduction(const std::string& name) {
  if (name == "sum") return LossReduction::kSum;
  if (name == "none") return LossReduction::kNone;
  return LossReduction::kMean;
}

inline CrossEntropyOptions CrossEntropyOptionsOf(const Operation& op) {
  COMMIR_CHECK(op.Is(OpKind::kCrossEntropy) || op.Is(OpKind::kCrossEntropyGrad),
               "CrossEntropyOptionsOf reads a cross_entropy or cross_entropy_grad op");
  CrossEntropyOptions options;
  options.reduction = ParseLossReduction(op.EnumAttr("reduction"));
  options.ignore_index = op.IntAttr("ignore_index");
  options.label_smoothing = op.NumberAttr("label_smoothing");
  options.z_loss = op.NumberAttr("z_loss");
  options.classes = op.IntAttr("classes");
  return options;
}

}  // namespace commir

#endif  // COMMIR_COMMIR_CROSS_ENTROPY_OP_H_
