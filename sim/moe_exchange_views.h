// The chunk blocks of moe-pipeline (transforms/schedules/moe_pipeline.h) that an
// expert-parallel all_to_all reads or writes in place, which launch no kernel of their own.
//
// NCCL's all_to_all is a group of ncclSend/ncclRecv calls, one pair per peer, and a send
// or receive takes any pointer and count: a chunk of the expert buffer [E, N, C/N, H]
// (chunk i: [E, 1, C/N, H]) is, per peer, E/n contiguous pieces of C/N rows, sent as E/n
// sends of the same group, and the combined rows are received the same way at their
// offsets in the combine's accumulator. DeepEP's dispatch and combine kernels go further
// and read and write each token's row where it lies (deepseek-ai/DeepEP). So:
//  * a `dynamic_slice` whose every user is an all_to_all, directly or through reshapes
//    (views), is the all_to_all reading in place;
//  * a `dynamic_update_slice` whose update is an all_to_all's result (directly or through
//    a reshape) used by nothing else is the all_to_all's receive landing in place.
// The cpu and cuda backends still copy these blocks (their all_to_all takes contiguous
// buffers): the sim prices what a tuned implementation runs, as it does for the blocks a
// GEMM reads in place (gemm_views.h); docs/commir-run-sim.md says so.
#ifndef COMMIR_SIM_MOE_EXCHANGE_VIEWS_H_
#define COMMIR_SIM_MOE_EXCHANGE_VIEWS_H_

#include "commir/ir.h"

namespace commir::sim {

// Whether `op` is a block an all_to_all reads or writes in place (above).
bool IsExchangeBlockInPlace(const Operation& op);

}  // namespace commir::sim

#endif  // COMMIR_SIM_MOE_EXCHANGE_VIEWS_H_
