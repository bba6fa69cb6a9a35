// Activation recomputation (autodiff{remat=...}): which forward ops the gradient function
// recomputes in the backward instead of keeping their results from the forward.
//
// A block is a run of forward ops between checkpoints, the values the forward keeps. The
// backward of a block first recomputes the block's inside from its checkpoints (ops
// marked `remat = B`), right before the block's first backward op, so the inside lives
// only while that block's backward runs (PyTorch's torch.utils.checkpoint, Megatron's
// --recompute-granularity full).
//
// The blocks of a flat function, which has no layer names, come from one of:
//   blocks:    the residual stream of pre-norm blocks. A value x that feeds a norm op
//              (layernorm, rmsnorm) as its input AND an `add` whose other operand is
//              computed from that norm's result starts a block; the add ends it. So
//              `h = x + attn(norm(x))` and `y = h + mlp(norm(h))` are two blocks (each
//              attention and each MLP), checkpointed at x, h and y.
//   remat-at:  explicit checkpoint values (`remat-at="%r1,%y"`); the block ending at a
//              checkpoint c holds the ops c's defining op reads from, back to the previous
//              checkpoints and the arguments.
// A block's inside is every op its end reads, transitively, stopping at checkpoints and
// arguments; the end's defining op itself (the residual add) stays in the forward. Ops
// after the last block (the loss head) and ops of no block are kept as without remat.
#ifndef COMMIR_TRANSFORMS_AUTODIFF_REMAT_H_
#define COMMIR_TRANSFORMS_AUTODIFF_REMAT_H_

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "commir/ir.h"

namespace commir {

enum class RematPolicy {
  kNone,    // keep every forward value the backward reads
  kBlocks,  // recompute each pre-norm residual block's inside
};

struct RematBlocks {
  // Each block's inside ops (of the differentiated function), in program order.
  std::vector<std::vector<const Operation*>> blocks;
  // The block whose recomputed copy an op's derivative rule reads: the first block (in
  // program order of their ends) that holds it. Ops of no block are absent.
  absl::flat_hash_map<const Operation*, int> owner;
};

// The residual blocks of `function` (RematPolicy::kBlocks); none found is no error (the
// gradient is then as without remat).
RematBlocks FindResidualBlocks(const Function& function);

// The blocks ending at the named values (names without '%', in any order). An unknown
// name is an error naming it.
absl::StatusOr<RematBlocks> FindCheckpointBlocks(const Function& function,
                                                 const std::vector<std::string>& names);

}  // namespace commir

#endif  // COMMIR_TRANSFORMS_AUTODIFF_REMAT_H_
