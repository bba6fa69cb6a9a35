// Slices a GEMM (or attention) reads or writes in place, which launch no kernel of their own.
//
// cuBLASLt describes each matrix by a pointer, a leading dimension and a batch stride
// (cublasLtMatrixLayout_t: rows, columns, ld, batch count, strided batch offset), so a
// GEMM can read a block of a larger tensor and write its result into a block of a larger
// buffer with no copy: the block is a pointer offset. TransformerEngine's
// tensor-parallel communication overlap relies on exactly this: its ring-exchange and
// pipelined all_gather + GEMM read each received chunk where it landed in the
// communication buffer and write each output chunk at its offset in the output, and
// its GEMM + reduce_scatter reads row blocks of the input in place
// (transformer_engine/common/comm_gemm_overlap). A collective-matmul schedule written
// in CommIR spells these blocks as `dynamic_slice` and `dynamic_update_slice`
// (transforms/schedules/collective_matmul.h); priced as copies they would charge the
// schedule for HBM traffic and launches the implementation does not have.
//
//  * a `dynamic_slice`, or a static `slice` along one dimension, whose every user is a
//    matmul or an attention's (or attention_grad's) q, k or v is a view of its operand
//    when the block is one strided matrix layout: the sliced dimension is one of the
//    last two (rows or columns: a pointer offset with the whole tensor's leading
//    dimension), or every dimension before it is 1 (a contiguous range). FlashAttention, like cuBLASLt, takes
//    each operand as a pointer and strides, and TransformerEngine's context parallelism
//    reads the halves of a received k/v block (zigzag's chunk pairs) in place this way.
//  * a `dynamic_update_slice(buffer, update, offset)` whose update is a matmul's result
//    used by nothing else, in the same block, is that GEMM's epilogue writing at the
//    offset, under the same layout condition; the buffer is updated in place (as the sim
//    already prices it). So is one whose update is the block a ring passes on (a
//    `shift`'s result, or the loop-carried value each iteration replaces by one): a block
//    written into the gathered value where TransformerEngine's ring exchange receives it
//    in the first place, its GEMM reading it and the next step sending it on from there
//    (the local block TransformerEngine copies into its buffer once is left out).
// Anything else (a slice read by an elementwise op, a block written by an add) is a
// kernel, priced as before. The predicates live in runtime/in_place.h, beside the
// interpreter's rule for what the backends read and write in place, so that the sim and
// the backends cannot drift apart.
#ifndef COMMIR_SIM_GEMM_VIEWS_H_
#define COMMIR_SIM_GEMM_VIEWS_H_

#include "commir/ir.h"

namespace commir::sim {

// Whether `op` is a block of a GEMM's operand or result addressed in place (above).
bool IsGemmBlockInPlace(const Operation& op);

}  // namespace commir::sim

#endif  // COMMIR_SIM_GEMM_VIEWS_H_
