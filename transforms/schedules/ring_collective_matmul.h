// ring-collective-matmul{direction=uni|bi, rs=owner|ring}: the collective-matmul decomposition (Wang et
// al., ASPLOS'23; XLA's windowed einsum) of each all_gather -> matmul and
// matmul -> reduce_scatter pair (collective_matmul.h says what matches): the collective
// becomes n-1 `shift`s of blocks around the ring over the collective's axes, each
// overlapping the GEMM of the block already held.
//
// all_gather + GEMM, uni: step s holds the block of device (rank - s) mod n; steps
// 0..n-2 run in a `for` loop that shifts the block on (stream 1) while multiplying it
// (main stream) and writing the product in place (dynamic_update_slice at
// ((rank - s) mod n) * m). The last step is peeled: it multiplies without sending, so no
// transfer is wasted (n-1 shifts).
// all_gather + GEMM, bi: each block is cut in two halves along the gathered dimension;
// the first halves travel forward (stream 1), the second halves backward (stream 2),
// each a one-way ring of n-1 steps with the last one peeled. Both links carry half a
// block per step, so each step's transfer takes half as long as uni's (for every n,
// n = 2 included) while the device still receives n-1 blocks; two half-block GEMMs per
// step. A block with an odd size cannot be halved: then whole blocks go both ways,
// ceil((n-1)/2) rounds, the last one forward only when n is even (the opposite block
// would arrive twice).
//
// GEMM + reduce_scatter, rs=owner (the default): TransformerEngine's ring-exchange
// reduce-scatter (split_overlap_rs_p2p in its userbuffers). Step s = 1 .. n-1 computes
// the addend for block (r + s) mod n and sends it straight to the device that owns that
// block (a `shift` by s: on an NVLink switch every peer is one hop), which receives it
// into slot s-1 of a buffer of the matmul's whole result shape; the own addend is
// computed last, into slot n-1, while the last transfer runs; one reduce_sum (or
// reduce_max) over the n slots, viewed as [n, block] along the scattered dimension, ends
// it. So the tp addends are summed once (n + 1 blocks of memory traffic), not by n-1
// adds of 3 blocks each, and the transfers do not wait for the adds. Every slot is
// written before the sum reads the buffer, so its `full` runs no fill
// (runtime/in_place.h: FillOverwrittenBeforeRead), each received block lands in its slot
// (ShiftReceivesInto) and the own GEMM writes its slot (MatmulWritesInto). The steps are
// unrolled (a shift's offset is static): n-1 shifts, as for the ring form. `reduce = min`
// has no one-kernel reduction in CommIR and keeps the ring form.
// GEMM + reduce_scatter, rs=ring, uni: device r computes, at step s, its addend for block
// (r - s - 1) mod n, adds it to the accumulator received from the left and passes the
// sum on (stream 1); after n-1 shifts the accumulator it holds is its own block, summed
// over the ring. The first step has nothing to add to and the last sends nothing.
// GEMM + reduce_scatter, bi: the first half of each block is summed by an accumulator
// travelling forward, the second half by one travelling backward, each a one-way ring
// of n-1 shifts; the device's two halves are joined by one `concat` at the end. With an
// odd block size: two whole accumulators per block, one collecting the ceil((n-1)/2)
// devices before it travelling forward, one the floor((n-1)/2) after it travelling
// backward; each device adds its own addend to both on arrival.
// Accumulators travel in the matmul's result element type (as NCCL does for bf16) and
// are combined with add, max or min as the reduce_scatter's `reduce` says.
//
// uni and half-block bi are one `for` loop of n-1 trips plus the peeled last step; the
// whole-block bi peels its first and last rounds and loops over the rounds in between
// (none for n <= 4), so the printed
// schedule has the same size for any ring size. Each ring uses one `rank` of its axes,
// emitted at the top of the function and shared by every rewritten pair.
#ifndef COMMIR_TRANSFORMS_SCHEDULES_RING_COLLECTIVE_MATMUL_H_
#define COMMIR_TRANSFORMS_SCHEDULES_RING_COLLECTIVE_MATMUL_H_

#include "absl/status/statusor.h"
#include "commir/ir.h"
#include "transforms/option_schema.h"
#include "transforms/pass.h"

namespace commir::schedules {

enum class RingDirection { kUni, kBi };
// How the GEMM + reduce_scatter side reduces (above): straight to each block's owner, or
// an accumulator passed around the ring. `direction` applies to the ring form only.
enum class ScatterForm { kOwner, kRing };

// Rewrites every matching pair of `module`'s spmd functions; returns how many.
absl::StatusOr<int> RingCollectiveMatmul(Module& module, RingDirection direction,
                                         ScatterForm scatter_form = ScatterForm::kOwner);

struct RingCollectiveMatmulOptions {
  RingDirection direction = RingDirection::kUni;
  ScatterForm scatter_form = ScatterForm::kOwner;

  static const OptionSchema<RingCollectiveMatmulOptions>& Schema();
};

COMMIR_DECLARE_PASS_WITH_OPTIONS(RingCollectiveMatmulPass, RingCollectiveMatmulOptions);

}  // namespace commir::schedules

#endif  // COMMIR_TRANSFORMS_SCHEDULES_RING_COLLECTIVE_MATMUL_H_
