// ring-attention for attention's backward: a sequence-split `attention_grad` whose keys
// and values are all_gathers and whose dk and dv are reduce-scattered along the sequence
// (attention_match.h) becomes a ring of n steps, as the forward does (ring_attention.h).
//
// Each device keeps its queries and what belongs to them (q, o, lse, dout and the dq
// accumulator). The k/v blocks travel round the ring with their dk/dv accumulators: at
// step s a device holds the block of device (rank - s) mod n, adds its queries'
// contribution to the accumulator that arrived with it, and shifts the accumulator on;
// k and v for the next step are shifted at the start of the step (stream 1, or 2 with
// axes left gathered), so they overlap the step's compute, and the accumulator shifted
// at the end of step s overlaps step s+1's compute (its first use is the add after that
// step's attention_grad). After the last step a device holds the accumulator of block
// rank + 1, which is complete: one more shift brings every block's dk/dv home (n shifts
// of dk/dv, n - 1 of k/v). Ending at home instead means the owner's own block comes
// last, so k/v would need one shift before step 0: the same bytes, equally exposed.
// Accumulators are f32 (f64 for f64) whatever the input type, so a bf16 backward sums
// its n partial gradients without n roundings, and convert back at the end.
//
// The block computation. The backward of a block needs p = exp(scale q k^T - lse) with
// the forward's global lse, as flash-attention's ring backward has it: for the block's
// keys that p is exactly their share of each row's softmax, and delta = rowsum(dout * o)
// with the global o is the same for every block, so dq, dk and dv of the block are exact
// partial sums. Each step therefore runs one attention_grad{partial_keys} (which uses
// p as is instead of renormalising its rows over the given keys; docs/language.md) on the
// held block with the global o, lse and dout: the backward's five GEMMs and nothing else.
// A row with no visible key anywhere (lse = -inf) gets p = 0 in every block. A ring over
// the axes a step leaves gathered (the double ring) decomposes that attention_grad the
// same way: its lse is the global one too.
//
// Causal blocks wholly in the queries' future cost no GEMM (the kernel skips rows that
// see no key), as in the forward. GQA, q_pos/k_pos and axes= (a ring over the
// leading axes: each step gathers the held blocks over the other axes and reduce-scatters
// its dk/dv over them again) work as in the forward.
//
// zigzag=true (causal, the same conditions as the forward's; else the contiguous ring and
// a remark): q, o, lse, dout, k and v are permuted into the zigzag layout (ring_zigzag.h;
// nothing when the function declares it), each step pairs the two query chunks with the
// block's two key chunks (four block backwards, two of them fully masked after the first
// step), the travelling dk/dv accumulators hold both key chunks, and dq, dk, dv are
// permuted back (or handed to a zigzag result's exchange as they are).
#ifndef COMMIR_TRANSFORMS_SCHEDULES_RING_ATTENTION_GRAD_H_
#define COMMIR_TRANSFORMS_SCHEDULES_RING_ATTENTION_GRAD_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "commir/ir.h"
#include "transforms/schedules/attention_match.h"

namespace commir::schedules {

// Rewrites the matched attention_grad (match.is_grad()) of `function` into a ring.
// Appends the ops it replaced (the attention_grad and the dk/dv reduce_scatters, their
// results now unused) to `rewritten` for EraseWithDeadProducers.
// zigzag: causal backward in the zigzag layout when it applies (as the forward's); why
// not is appended to `skipped` when given.
absl::Status RingAttentionGrad(Function& function, const GatheredAttention& match, bool zigzag,
                               std::vector<Operation*>* rewritten,
                               std::vector<std::string>* skipped);

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_RING_ATTENTION_GRAD_H_
